import pytest


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


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_stop_lost_in_a_finalizer_is_raised_again(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from r2s2r_common import errors

    monkeypatch.setattr(errors, "_stops", [])  # this process was never told to stop
    errors.raise_if_stop_requested()

    class Collected:
        def __del__(self) -> None:  # where a signal handler may run: its exception is lost
            raise errors.request_stop("SIGTERM")

    Collected()
    gc.collect()
    with pytest.raises(errors.Terminated) as raised:
        errors.raise_if_stop_requested()
    assert raised.value.signal_name == "SIGTERM" and raised.value.code == errors.ExitCode.TERMINATED
