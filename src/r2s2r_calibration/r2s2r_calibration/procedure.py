"""The world-grounding procedure against a running cell, through what a real cell exposes.

The procedure talks to the cell only through a :class:`CellClient`: camera images and
``camera_info``, head depth, ``/joint_states``, the trajectory controllers, the belt encoder,
the nominal ``/tf_static`` and the trial service (to get an object onto the belt). The ROS
implementation lives in :mod:`r2s2r_calibration.nodes.calibration`; :class:`SimCellClient`
serves an in-process :class:`r2s2r_sim.cell_runtime.SimCell` the same way (tests, benchmark).
Nothing here reads a twin file.

Every step is a :data:`~r2s2r_calibration.procedure_types.Step` of :mod:`.steps` (one module
per step family) and :data:`STEPS` is their one table, in run order; each step can run alone,
later steps use earlier results when present:

- ``intrinsics`` / ``extrinsics`` (:mod:`.steps.board`): need board views. A real cell has an
  operator who holds the board; a cell client without a board operator
  (:attr:`CellClient.board_operator`) makes these steps fail with a
  :class:`BoardUnavailableError` that says so.
- ``registration`` / ``bins`` (:mod:`.steps.scene`): belt and bin poses from one head depth
  image, then each bin's x, y and yaw from hand-camera views of its rim.
- ``sysid`` (:mod:`.steps.sysid`): per-joint excitation through the controllers,
  ``/joint_states`` logged, controller model fitted.
- ``belt`` (:mod:`.steps.belt`): encoder rate and the surface speed of an object on the belt,
  tracked in the head depth images (points above the registered belt surface).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from r2s2r_world.cell_identity import CellIdentity
from r2s2r_world.world import WorldParams

from r2s2r_calibration.artifact import GroundingArtifact
from r2s2r_calibration.cell_client import CellClient
from r2s2r_calibration.errors import CalibrationError
from r2s2r_calibration.procedure_types import GroundingRun, ProcedureConfig, ProgressFn, Step
from r2s2r_calibration.steps.belt import run_belt
from r2s2r_calibration.steps.board import run_extrinsics_step, run_intrinsics_step
from r2s2r_calibration.steps.scene import run_bin_views, run_registration
from r2s2r_calibration.steps.sysid import run_sysid

STEPS: dict[str, Step] = {
    "intrinsics": run_intrinsics_step,
    "extrinsics": run_extrinsics_step,
    "registration": run_registration,
    "bins": run_bin_views,
    "sysid": run_sysid,
    "belt": run_belt,
}
"""Grounding steps by name, in the order the full procedure runs them."""

STEP_NAMES: tuple[str, ...] = tuple(STEPS)
"""Grounding steps, in the order the full procedure runs them."""


def parse_steps(text: str) -> list[str]:
    """Parse ``--steps`` (comma separated, or ``all``) into step names in run order.

    Raises:
        ValueError: Unknown step names (names the known ones).

    """
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names or names == ["all"]:
        return list(STEP_NAMES)
    unknown = sorted(set(names) - set(STEP_NAMES))
    if unknown:
        raise ValueError(f"--steps: unknown steps {unknown}; expected a subset of {STEP_NAMES}")
    return [name for name in STEP_NAMES if name in names]


def run_grounding(
    client: CellClient,
    nominal: WorldParams,
    steps: Sequence[str] = STEP_NAMES,
    config: ProcedureConfig | None = None,
    progress: ProgressFn | None = None,
    keep_going: bool = True,
) -> GroundingRun:
    """Run grounding steps against a cell and collect the artifact.

    Args:
        client: The cell.
        nominal: The nominal world (description, datasheet values, default gains).
        steps: Steps to run (:data:`STEP_NAMES`), run in that order.
        config: Settings; defaults to :class:`ProcedureConfig`.
        progress: One-line progress callback.
        keep_going: Continue with the next step when one fails (its error is recorded).

    Returns:
        The run, with the artifact of every step that succeeded.

    Raises:
        CalibrationError: The first failing step's error when ``keep_going`` is False.

    """
    cfg = config or ProcedureConfig()
    say = progress or (lambda _message: None)
    run = GroundingRun(
        artifact=GroundingArtifact(
            cell=CellIdentity(name=cfg.cell_name) if cfg.cell_name is not None else None
        )
    )
    for step in [s for s in STEP_NAMES if s in steps]:
        say(f"== {step}")
        started = time.perf_counter()
        try:
            client.begin_step(step)
            STEPS[step](client, nominal, cfg, run, say)
            run.steps_run.append(step)
        except CalibrationError as error:
            run.failures[step] = str(error)
            say(f"{step}: FAILED: {error}")
            if not keep_going:
                raise
        finally:
            run.step_wall_s[step] = time.perf_counter() - started
            say(f"{step}: {run.step_wall_s[step]:.1f} s wall")
    # Re-validate so that world_overrides is derived from every record added above.
    run.artifact = GroundingArtifact.model_validate(
        run.artifact.model_dump(mode="python", exclude={"world_overrides"})
    )
    return run
