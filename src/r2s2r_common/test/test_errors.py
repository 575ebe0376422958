def test_sigterm_as_flag_sets_its_event_and_restores_the_handler() -> None:
    import os
    import signal

    from r2s2r_common.errors import sigterm_as_flag

    before = signal.getsignal(signal.SIGTERM)
    with sigterm_as_flag() as terminated:
        assert not terminated.is_set()
        os.kill(os.getpid(), signal.SIGTERM)
        assert terminated.wait(2.0)
    assert signal.getsignal(signal.SIGTERM) == before
