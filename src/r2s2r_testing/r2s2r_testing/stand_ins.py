"""Small programs that tests start as processes, in place of a real command or owner.

Run as ``python -m r2s2r_testing.stand_ins NAME [ARGS...]``:

- ``sleeper``: prints ``sleeper PID`` and sleeps 10 minutes (a stage command that never ends);
- ``fail CODE [MESSAGE]``: prints MESSAGE and exits with CODE (a command that fails);
- ``print-lines LINE...``: prints each argument on a line of its own (a command's output);
- ``group-and-owner``: prints its process group and ``R2S2R_OWNER_PID`` (an owned child);
- ``half-written-bag ROOT``: writes one finished episode bag under ROOT, then 201 messages of a
  second one (flushed after each), prints ``READY`` and sleeps (to be SIGKILLed mid-episode);
- ``owner [--child-from-thread]``: starts an owned child (:func:`r2s2r_common.process.spawn_owned`:
  ``sleep 600``, or the ``owned-child`` stand-in from a thread that ends at once), prints its
  pid and sleeps;
- ``owned-child``: watches its owner and ends with it, else sleeps;
- ``import-probe PACKAGE...``: imports every module of the packages; prints one JSON line with
  the modules that failed to import (and why) and every module then loaded.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import sys
import threading
import time
from pathlib import Path

SLEEP_S = 600.0
"""How long the sleeping stand-ins sleep (they are killed long before)."""


def sleeper(_args: argparse.Namespace) -> int:
    """Print this process's pid, then sleep."""
    print("sleeper", os.getpid(), flush=True)
    time.sleep(SLEEP_S)
    return 0


def fail(args: argparse.Namespace) -> int:
    """Print the message; exit with the code."""
    if args.message:
        print(args.message, flush=True)
    return int(args.code)


def group_and_owner(_args: argparse.Namespace) -> int:
    """Print this process's group id and the owner pid it was given."""
    print(os.getpgid(0), os.environ["R2S2R_OWNER_PID"])
    return 0


def print_lines(args: argparse.Namespace) -> int:
    """Print each argument on its own line."""
    for line in args.lines:
        print(line)
    return 0


def half_written_bag(args: argparse.Namespace) -> int:
    """Write a finished bag, then part of a second one; print READY and wait to be killed."""
    from r2s2r_recorder.bag_format import EpisodeInfo
    from r2s2r_recorder.bag_writer import EpisodeBagWriter

    from r2s2r_testing.bags import EpisodeSpec, episode_messages, write_episode_bag

    root = Path(args.root)
    write_episode_bag(root / "episode_000000", EpisodeSpec())
    writer = EpisodeBagWriter(
        root / "episode_000001", EpisodeInfo(episode_id="episode_000001"), flush_period_s=0.0
    )
    for n, (t, topic, msgtype, data) in enumerate(episode_messages(EpisodeSpec())):
        writer.add_topic(topic, msgtype)
        writer.write(topic, data, t)
        if n == 200:
            print("READY", flush=True)
            time.sleep(60)
    return 1  # never reached when the test kills it


def owner(args: argparse.Namespace) -> int:
    """Start an owned child, print its pid, sleep."""
    from r2s2r_common.process import spawn_owned

    if args.child_from_thread:
        # Started from a thread that ends at once: PDEATHSIG would fire now, so the child
        # must rely on its owner watch (and live on while the owner lives).
        child = [sys.executable, "-m", "r2s2r_testing.stand_ins", "owned-child"]
        holder = []
        thread = threading.Thread(target=lambda: holder.append(spawn_owned(child)))
        thread.start()
        thread.join()
        process = holder[0]
    else:
        process = spawn_owned(["sleep", str(int(SLEEP_S))])
    print(process.pid, flush=True)
    time.sleep(SLEEP_S)
    return 0


def owned_child(_args: argparse.Namespace) -> int:
    """Watch the owner (end with it); sleep meanwhile."""
    from r2s2r_common.process import terminate_self, watch_owner

    watch_owner(terminate_self)
    time.sleep(SLEEP_S)
    return 0


def import_probe(args: argparse.Namespace) -> int:
    """Import every module of the packages; print the failures and the loaded modules."""
    failed = {}
    for package in args.packages:
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, package + "."):
            try:
                importlib.import_module(info.name)
            except ImportError as error:
                failed[info.name] = f"{type(error).__name__}: {error}"
    print(json.dumps({"failed": failed, "modules": sorted(sys.modules)}))
    return 0


def parser() -> argparse.ArgumentParser:
    """Build the stand-ins' command line (one subcommand per stand-in)."""
    top = argparse.ArgumentParser(prog="python -m r2s2r_testing.stand_ins", description=__doc__)
    commands = top.add_subparsers(dest="name", required=True)
    commands.add_parser("sleeper").set_defaults(run=sleeper)
    failing = commands.add_parser("fail")
    failing.add_argument("code", type=int)
    failing.add_argument("message", nargs="?", default="")
    failing.set_defaults(run=fail)
    commands.add_parser("group-and-owner").set_defaults(run=group_and_owner)
    lines = commands.add_parser("print-lines")
    lines.add_argument("lines", nargs="*")
    lines.set_defaults(run=print_lines)
    bag = commands.add_parser("half-written-bag")
    bag.add_argument("root")
    bag.set_defaults(run=half_written_bag)
    owning = commands.add_parser("owner")
    owning.add_argument("--child-from-thread", action="store_true")
    owning.set_defaults(run=owner)
    commands.add_parser("owned-child").set_defaults(run=owned_child)
    probe = commands.add_parser("import-probe")
    probe.add_argument("packages", nargs="+")
    probe.set_defaults(run=import_probe)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run the stand-in named first on the command line; return its exit code."""
    args = parser().parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
