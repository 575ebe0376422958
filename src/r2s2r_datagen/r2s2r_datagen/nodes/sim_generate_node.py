"""``sim_generate``: the main job as a node, so that ``r2s2r launch sim_generate`` runs it.

Declares its parameters from :class:`r2s2r_datagen.config.GenerateConfig` (episodes per
configuration, configurations, workers, Ray address, output dir, resume, ...), runs the job it
is given in a worker thread, publishes progress on ``/diagnostics`` once a second, and exits
when the job is done: 0 on success, the job's exit code when nothing could run (3) or episodes
are left without a result (4), 2 on bad parameters, 1 when the job raised
(:class:`r2s2r_common.errors.ExitCode`). The executable is the bring-up's
(``r2s2r.pipeline.main_job``: the prerequisites, then generation); run as a module, the job is
:func:`r2s2r_datagen.runner.run_generation` alone (generation from the inputs that exist).
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from r2s2r_common.errors import ExitCode
from r2s2r_common.ros.params import declare_config
from r2s2r_common.ros.qos import DEFAULT_QOS
from r2s2r_common.ros.runner import run_node
from r2s2r_common.topics import DIAGNOSTICS
from rclpy.node import Node

from r2s2r_datagen.config import GenerateConfig
from r2s2r_datagen.runner import ProgressCallback, run_generation
from r2s2r_datagen.summary import RunSummary

DIAGNOSTICS_PERIOD_S = 1.0


# The schema this node declares its ROS parameters from; r2s2r.graph types launch
# parameter overrides by it (ints stay ints under ros2 launch and r2s2r launch).
PARAMETER_SCHEMA = GenerateConfig

GenerationJob = Callable[[GenerateConfig, ProgressCallback, Callable[[str], None]], RunSummary]
"""``(config, progress callback, log) -> summary``: what the node runs."""


class SimGenerateNode(Node):
    """Runs one generation job and reports its progress.

    Args:
        job: The job (default: generation alone).

    Raises:
        ConfigError: Bad parameters (at construction).

    """

    def __init__(self, job: GenerationJob = run_generation) -> None:
        super().__init__("sim_generate")
        self.config = declare_config(self, PARAMETER_SCHEMA)
        self._job = job
        self._lock = threading.Lock()
        self._progress = (0, 0, 0, 0)
        self._started = time.monotonic()
        self.summary: RunSummary | None = None
        self.error: str | None = None
        self.done = threading.Event()
        self._diagnostics = self.create_publisher(DiagnosticArray, DIAGNOSTICS, DEFAULT_QOS)
        self.create_timer(DIAGNOSTICS_PERIOD_S, self._publish_diagnostics)
        self._thread = threading.Thread(target=self._run, name="sim_generate_job", daemon=True)
        self._thread.start()

    def _on_progress(self, finished: int, total: int, successes: int, attempts: int) -> None:
        with self._lock:
            self._progress = (finished, total, successes, attempts)

    def _log(self, text: str) -> None:
        self.get_logger().info(text)

    def _run(self) -> None:
        try:
            self.summary = self._job(self.config, self._on_progress, self._log)
            self.summary.print(file=sys.stdout)
        except Exception as error:
            self.error = f"{type(error).__name__}: {error}"
            self.get_logger().error(f"generation failed: {self.error}\n{traceback.format_exc()}")
        finally:
            self._publish_diagnostics()
            self.done.set()

    @property
    def exit_code(self) -> int:
        """Exit code of the finished job."""
        if self.error is not None:
            return ExitCode.BAD_INPUT if self.error.startswith("ConfigError") else ExitCode.FAILED
        return self.summary.exit_code if self.summary is not None else ExitCode.FAILED

    def _publish_diagnostics(self) -> None:
        with self._lock:
            finished, total, successes, attempts = self._progress
        minutes = max(time.monotonic() - self._started, 1e-6) / 60.0
        status = DiagnosticStatus(name="sim_generate: job", hardware_id="datagen")
        if self.error is not None:
            status.level, status.message = DiagnosticStatus.ERROR, self.error[:200]
        elif self.done.is_set():
            status.level, status.message = DiagnosticStatus.OK, "finished"
        else:
            status.level, status.message = DiagnosticStatus.OK, "generating"
        status.values = [
            KeyValue(key="finished", value=str(finished)),
            KeyValue(key="total", value=str(total)),
            KeyValue(key="successes", value=str(successes)),
            KeyValue(key="attempts", value=str(attempts)),
            KeyValue(key="yield", value=f"{successes / attempts:.3f}" if attempts else "-"),
            KeyValue(key="episodes_per_min", value=f"{finished / minutes:.2f}"),
            KeyValue(key="output_dir", value=self.config.output_dir),
        ]
        message = DiagnosticArray(status=[status])
        message.header.stamp = self.get_clock().now().to_msg()
        self._diagnostics.publish(message)


def main(args: list[str] | None = None, job: GenerationJob = run_generation) -> None:
    """Run the job; exit 0 when done, non-zero on failure (see the module docstring).

    Ctrl-C (or SIGTERM) before the job is done exits with code 130.
    """
    sys.exit(
        run_node(
            lambda: SimGenerateNode(job),
            args=args,
            until=lambda node: node.done.is_set(),
            exit_code=lambda node: node.exit_code,
            interrupted_exit_code=ExitCode.INTERRUPTED,
        )
    )


if __name__ == "__main__":
    main()
