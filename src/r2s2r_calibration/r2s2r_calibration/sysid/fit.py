"""One segment's least-squares fits: a joint's gains at a given latency, and the latency itself.

The residual is the simulated response (:class:`.SegmentSimulator`) minus the logged one,
normalized by the excitation amplitude; gains are searched in log space within
``gain_bounds_factor`` of nominal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from r2s2r_calibration.geometry import FloatArray
from r2s2r_calibration.sysid.config import SysIdConfig
from r2s2r_calibration.sysid.excitation import ExcitationSegment
from r2s2r_calibration.sysid.log import JointStateLog
from r2s2r_calibration.sysid.simulation import SegmentSimulator

LINEAR_GAIN_CHANGE_MAX = 0.02
"""Largest log-gain change taken from one linearized step (beyond it, 5 % of the change is lost)."""


@dataclass(frozen=True)
class GainFit:
    """One joint's (kp, kd) fit: the gains, its cost, log-space covariance and Jacobian."""

    kp: float
    kd: float
    cost: float
    cov: FloatArray
    jacobian: FloatArray


def _measured(log: JointStateLog, stamps: FloatArray, joint: str) -> FloatArray:
    return np.interp(stamps, log.stamps_s, log.positions[:, log.column(joint)])


class _Fitter:
    def __init__(
        self,
        simulator: SegmentSimulator,
        log: JointStateLog,
        config: SysIdConfig,
        gains: dict[str, tuple[float, float]],
    ):
        self.sim = simulator
        self.log = log
        self.cfg = config
        self.gains = dict(gains)
        self.nominal = dict(gains)

    def residual(
        self,
        segment: ExcitationSegment,
        kp: float,
        kd: float,
        latency_s: float,
        shift_s: float = 0.0,
    ) -> FloatArray:
        """Return the normalized error of the segment's joint (``shift_s`` delays the response).

        The model is time invariant and at rest before a segment, so a response simulated with
        latency L and delayed by ``shift_s`` is the response with latency L + ``shift_s``: a
        continuous latency at the price of one simulation.
        """
        gains = dict(self.gains)
        gains[segment.joint] = (kp, kd)
        self.sim.set_gains(gains)
        end = segment.start_time_s + self.cfg.fit_window_s if segment.kind == "step" else None
        preroll = self.cfg.preroll_s
        stamps, simulated = self.sim.simulate(
            segment, self.log, latency_s, preroll, [segment.joint], end
        )
        if shift_s != 0.0:
            simulated = np.interp(stamps - shift_s, stamps, simulated[:, 0])[:, None]
        measured = _measured(self.log, stamps, segment.joint)
        return (simulated[:, 0] - measured) / segment.amplitude_rad  # type: ignore[no-any-return]

    def _bounds(self, joint: str) -> tuple[FloatArray, FloatArray]:
        nominal_kp, nominal_kd = self.nominal[joint]
        factor = math.log(self.cfg.gain_bounds_factor)
        centre = np.array([math.log(nominal_kp), math.log(max(nominal_kd, 1e-6))])
        return centre - factor, centre + factor

    def fit(self, segment: ExcitationSegment, latency_s: float) -> GainFit:
        """Fit (kp, kd) of the segment's joint at a fixed latency."""
        kp0, kd0 = self.gains[segment.joint]
        lower, upper = self._bounds(segment.joint)
        x0 = np.clip(np.log([kp0, max(kd0, 1e-6)]), lower + 1e-6, upper - 1e-6)

        def fun(x: FloatArray) -> FloatArray:
            return self.residual(segment, math.exp(x[0]), math.exp(x[1]), latency_s)

        solution = least_squares(
            fun, x0, bounds=(lower, upper), diff_step=1e-4, xtol=1e-8, ftol=1e-10, max_nfev=60
        )
        cost, cov = _cost_and_cov(solution.fun, solution.jac)
        return GainFit(
            kp=math.exp(solution.x[0]),
            kd=math.exp(solution.x[1]),
            cost=cost,
            cov=cov,
            jacobian=np.asarray(solution.jac, dtype=float),
        )

    def latency_sensitivity(
        self, segment: ExcitationSegment, fit: GainFit, latency_s: float
    ) -> tuple[float, float]:
        """Relative change of (kp, kd) when the latency is ``latency_s`` instead of the fit's.

        One Gauss-Newton step from the fit, with its Jacobian in log(kp), log(kd): one
        simulation, where a refit takes ~15. The step is accepted while it is small
        (:data:`LINEAR_GAIN_CHANGE_MAX`; a latency uncertainty of tens of microseconds, the
        usual case); a larger one starts a refit at the other latency instead.
        """
        residual = self.residual(segment, fit.kp, fit.kd, latency_s)
        step, *_ = np.linalg.lstsq(fit.jacobian, -residual, rcond=None)
        if np.all(np.isfinite(step)) and float(np.max(np.abs(step))) <= LINEAR_GAIN_CHANGE_MAX:
            lower, upper = self._bounds(segment.joint)
            x = np.clip(np.log([fit.kp, max(fit.kd, 1e-6)]) + step, lower, upper)
            return math.exp(x[0]) / fit.kp - 1.0, math.exp(x[1]) / fit.kd - 1.0
        refit = self.fit(segment, latency_s)
        return refit.kp / fit.kp - 1.0, refit.kd / fit.kd - 1.0

    def fit_latency(self, segment: ExcitationSegment, max_latency_s: float) -> tuple[float, float]:
        """Fit (kp, kd, latency) of one step, latency continuous; return latency and its std.

        A grid of delayed responses (one simulation, :meth:`residual` with ``shift_s``) finds
        the start; the final fit simulates every candidate latency itself, since the controller
        starts a command at ``receipt + latency`` and samples it on its ticks from there: a
        latency between two ticks shifts the sampled command by less than a period, which a
        delayed response on the tick grid does not reproduce.
        """
        lower, upper = self._bounds(segment.joint)
        kp0, kd0 = self.gains[segment.joint]
        grid = np.linspace(0.0, max_latency_s, 25)
        costs = [float(np.sum(self.residual(segment, kp0, kd0, 0.0, s) ** 2)) for s in grid]
        start = float(grid[int(np.argmin(costs))])
        x0 = np.array([*np.clip(np.log([kp0, max(kd0, 1e-6)]), lower, upper), start])

        def shifted(x: FloatArray) -> FloatArray:
            return self.residual(segment, math.exp(x[0]), math.exp(x[1]), 0.0, x[2])

        coarse = least_squares(
            shifted,
            x0,
            bounds=(np.append(lower, 0.0), np.append(upper, max_latency_s + 1e-9)),
            diff_step=[1e-4, 1e-4, 1e-2],
            xtol=1e-8,
            ftol=1e-10,
            max_nfev=60,
        )
        # Latency in milliseconds for the final fit, so that the finite-difference step
        # (relative, at least diff_step in the variable's unit) is a small fraction of a period.
        scale = 1000.0

        def simulated(x: FloatArray) -> FloatArray:
            return self.residual(segment, math.exp(x[0]), math.exp(x[1]), x[2] / scale)

        x1 = coarse.x.copy()
        x1[2] = min(max(x1[2], 0.0), max_latency_s) * scale
        solution = least_squares(
            simulated,
            x1,
            bounds=(np.append(lower, 0.0), np.append(upper, max_latency_s * scale + 1e-6)),
            diff_step=[1e-4, 1e-4, 2e-3],
            xtol=1e-10,
            ftol=1e-12,
            max_nfev=80,
        )
        _, cov = _cost_and_cov(solution.fun, solution.jac)
        return float(solution.x[2] / scale), float(math.sqrt(max(cov[2, 2], 0.0)) / scale)


def _cost_and_cov(residual: FloatArray, jacobian: FloatArray) -> tuple[float, FloatArray]:
    n_params = jacobian.shape[1]
    dof = max(residual.size - n_params, 1)
    sigma2 = float(residual @ residual) / dof
    try:
        cov = np.linalg.inv(jacobian.T @ jacobian) * sigma2
    except np.linalg.LinAlgError:
        cov = np.full((n_params, n_params), np.inf)
    return float(residual @ residual), cov
