"""The ``r2s2r`` command line: graph launching and the offline steps of the pipeline.

Verbs live in the packages that own them (a verb of one package's core) or here, in the
bring-up (a verb that starts a graph or runs stages of the pipeline: ``launch``, ``graphs``,
``record-demos``, ``ground``, ``generate``, ``evaluate``, ``experiment``; see
:mod:`r2s2r.pipeline`), and are imported only when used, so ``r2s2r --help`` stays fast and a
verb's heavy dependencies (torch, open3d, ...) load only for that verb.

The error boundary of every verb is :func:`main`: an error prints one line on stderr (what,
which file/key/value, what to do) and sets the exit code, 2 for bad input and 1 for a failed
run (:mod:`r2s2r_common.errors`); ``r2s2r --debug VERB ...`` or ``R2S2R_DEBUG=1`` adds the
traceback. SIGTERM unwinds the verb like Ctrl-C does (its children are stopped), and a verb
started by another r2s2r process ends when that owner dies (:mod:`r2s2r_common.process`). The
line a stop prints carries what the verb noted on the way out (the stage it interrupted and how
to resume it, :func:`r2s2r.pipeline.cache.interrupted_note`).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from typing import Any, ClassVar

import click
from r2s2r_common.errors import (
    DEBUG_ENV,
    ExitCode,
    Terminated,
    debug_enabled,
    describe,
    one_line,
    request_stop,
)
from r2s2r_common.process import terminate_self, watch_owner
from r2s2r_common.ros_domain import apply_discovery

# verb -> "module:attribute" of a click command or group.
LAZY_COMMANDS: dict[str, str] = {
    "launch": "r2s2r.cli.launch:launch_command",
    "graphs": "r2s2r.cli.launch:graphs_command",
    "bag2dataset": "r2s2r_recorder.cli:bag2dataset",
    "dataset": "r2s2r_recorder.cli:dataset_group",
    "bag": "r2s2r_recorder.cli:bag_group",
    "record-demos": "r2s2r.cli.record_demos:record_demos_command",
    "ground": "r2s2r.cli.ground:ground_command",
    "generate": "r2s2r.cli.generate:generate_command",
    "train": "r2s2r_policy.cli:train_command",
    "evaluate": "r2s2r.cli.evaluate:evaluate_command",
    "experiment": "r2s2r.cli.experiment:experiment_command",
    "analyze": "r2s2r.cli.analyze:analyze_group",
    "view": "r2s2r_view.cli:view_command",
    "translate": "r2s2r_translation.cli:translate_group",
}


class LazyGroup(click.Group):
    """A click group whose sub-commands (``lazy_commands``) are imported on first use."""

    lazy_commands: ClassVar[dict[str, str]] = LAZY_COMMANDS

    def list_commands(self, ctx: click.Context) -> list[str]:
        """All verbs, eager and lazy, sorted."""
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Import a lazy verb when it is asked for."""
        if cmd_name in self.lazy_commands:
            module_name, attribute = self.lazy_commands[cmd_name].split(":")
            command = getattr(importlib.import_module(module_name), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.lazy_commands[cmd_name]} is not a click command")
            return command
        return super().get_command(ctx, cmd_name)


def _enable_debug(_ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        os.environ[DEBUG_ENV] = "1"


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option("0.1.0", prog_name="r2s2r")
@click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_enable_debug,
    help=f"Print the traceback of an error (same as {DEBUG_ENV}=1).",
)
def cli() -> None:
    """r2s2r: real2sim2real co-training for a conveyor pick-and-sort cell."""


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` in the main thread (verbs may install their own)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(_signum: int, _frame: Any) -> None:
        raise request_stop("SIGTERM")  # raised again by the loops when a finalizer loses it

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _click_error_line(error: click.ClickException) -> str:
    ctx = getattr(error, "ctx", None)
    where = ctx.command_path if ctx is not None else "r2s2r"
    text = one_line(error.format_message())
    if isinstance(error, click.UsageError):
        text += f" (see '{where} --help')"
    return f"{where}: error: {text}"


def _stop_line(text: str, stop: BaseException) -> str:
    """``text`` and the notes of the stop (click's Abort: of the Ctrl-C it stands for)."""
    cause = stop.__cause__ if isinstance(stop, click.exceptions.Abort) else None
    notes = getattr(cause or stop, "__notes__", None) or []
    return ": ".join([text, *notes])


def main(argv: list[str] | None = None) -> Any:
    """Entry point: run the CLI; every error becomes one line on stderr and an exit code.

    Exit codes (:class:`r2s2r_common.errors.ExitCode`; docs/architecture.md lists them): 0 done,
    1 failed run (or a bug), 2 bad input, 130 interrupted, 143 SIGTERM; a verb may also end
    with 3 (nothing done) or 4 (incomplete).
    """
    watch_owner(terminate_self)
    try:
        # Every graph this command starts, and its own ROS clients, discover on this host only
        # unless R2S2R_ROS_DISCOVERY opens it (r2s2r_common.ros_domain).
        apply_discovery()
        with _sigterm_unwinds():
            return cli.main(args=argv, prog_name="r2s2r", standalone_mode=False)
    except click.exceptions.Abort as aborted:
        click.echo(_stop_line("r2s2r: aborted", aborted), err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as error:
        click.echo(_click_error_line(error), err=True)
        sys.exit(ExitCode.BAD_INPUT if error.exit_code in (1, 2) else error.exit_code)
    except Terminated as stopped:
        click.echo(_stop_line(f"r2s2r: stopped by {stopped.signal_name}", stopped), err=True)
        sys.exit(stopped.code)
    except KeyboardInterrupt as interrupted:
        click.echo(_stop_line("r2s2r: interrupted", interrupted), err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except Exception as error:
        code, line = describe(error)
        if debug_enabled():
            traceback.print_exc()
        click.echo(f"r2s2r: error: {line}", err=True)
        sys.exit(code)
