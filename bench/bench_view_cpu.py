"""What the browser view costs the node graph: real_deploy with and without ``viewer:=true``.

Each run starts ``r2s2r launch real_deploy [viewer:=true]`` (the twin and the cell's nodes),
waits ``--warmup-s`` for it to come up, then sums the CPU time of every process of the graph
(the supervisor and all its descendants, the Rerun server included) over ``--window-s`` and
reports it in cores (1.0 = one core busy). The viewer's own processes (its node and the Rerun
server) are also reported alone. No browser is connected: the figure is what the graph pays
to keep the view served and fed; a connected web viewer runs in the browser's process.
The two runs alternate (``--repeats``) so a change of machine load hits both.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import benchlib
import psutil

REPO = benchlib.REPO


def graph_cpu(viewer: bool, warmup_s: float, window_s: float, web_port: int) -> dict[str, float]:
    """Run real_deploy once; return CPU cores used by the graph and by the viewer alone."""
    command = [sys.executable, "-m", "r2s2r.cli", "launch", "real_deploy", "--no-progress"]
    if viewer:
        command += [
            "viewer:=true",
            f"viewer_web_port:={web_port}",
            f"viewer_grpc_port:={web_port + 1}",
        ]
    supervisor = subprocess.Popen(
        command,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        time.sleep(warmup_s)
        if supervisor.poll() is not None:
            raise SystemExit(f"real_deploy exited during warm-up (code {supervisor.returncode})")
        root = psutil.Process(supervisor.pid)

        def snapshot() -> dict[int, tuple[str, float]]:
            out: dict[int, tuple[str, float]] = {}
            for process in [root, *root.children(recursive=True)]:
                try:
                    times = process.cpu_times()
                    out[process.pid] = (" ".join(process.cmdline()), times.user + times.system)
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            return out

        before = snapshot()
        started = time.monotonic()
        time.sleep(window_s)
        after = snapshot()
        elapsed = time.monotonic() - started
        total = viewer_only = 0.0
        for pid, (cmdline, cpu_s) in after.items():
            used = cpu_s - before.get(pid, (cmdline, 0.0))[1]
            total += used
            if (
                "r2s2r_view" in cmdline
                or "rerun --serve-web" in cmdline
                or "rerun_cli/rerun" in cmdline
            ):
                viewer_only += used
        return {"graph_cores": total / elapsed, "viewer_cores": viewer_only / elapsed}
    finally:
        os.killpg(supervisor.pid, signal.SIGINT)
        try:
            supervisor.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(supervisor.pid, signal.SIGKILL)
            supervisor.wait()


def main() -> None:
    """Measure and report."""
    parser = benchlib.parser(__doc__)
    parser.add_argument("--warmup-s", type=float, default=25.0, help="Wait after start (s).")
    parser.add_argument("--window-s", type=float, default=30.0, help="CPU measured over (s).")
    parser.add_argument("--repeats", type=int, default=1, help="Pairs of runs (alternating).")
    parser.add_argument("--web-port", type=int, default=19090, help="Viewer port (and +1).")
    args = parser.parse_args()
    without: list[float] = []
    with_view: list[float] = []
    viewer_alone: list[float] = []
    for _ in range(args.repeats):
        without.append(graph_cpu(False, args.warmup_s, args.window_s, args.web_port)["graph_cores"])
        measured = graph_cpu(True, args.warmup_s, args.window_s, args.web_port)
        with_view.append(measured["graph_cores"])
        viewer_alone.append(measured["viewer_cores"])
    mean = lambda values: sum(values) / len(values)  # noqa: E731
    load = os.getloadavg()[0]
    benchlib.report(
        "view_cpu",
        [
            benchlib.Figure("graph_cpu_without_viewer", round(mean(without), 3), "cores"),
            benchlib.Figure("graph_cpu_with_viewer", round(mean(with_view), 3), "cores"),
            benchlib.Figure(
                "viewer_cpu", round(mean(viewer_alone), 3), "cores", None, "node + Rerun server"
            ),
            benchlib.Figure(
                "viewer_cost",
                round(mean(with_view) - mean(without), 3),
                "cores",
                None,
                f"difference; load average {load:.1f} at the end",
            ),
        ],
        title=f"real_deploy CPU over {args.window_s:g} s, x{args.repeats} (no browser connected)",
    )


if __name__ == "__main__":
    Path(REPO / "runs").mkdir(exist_ok=True)
    main()
