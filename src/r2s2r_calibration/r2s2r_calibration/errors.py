"""Exceptions raised by the world-grounding solvers.

Every solver refuses a poor result instead of returning it: the exception says what is missing
or out of range, the measured value, the threshold and what the operator should do about it.
All of them derive from :class:`CalibrationError` (a :class:`ValueError`) so a caller can catch
the family at the node or CLI boundary.
"""

from __future__ import annotations


class CalibrationError(ValueError):
    """Base class of every world-grounding refusal."""


class BoardNotDetectedError(CalibrationError):
    """The calibration board was not found in an image (or in too few of them)."""


class TooFewViewsError(CalibrationError):
    """Too few usable (detected, distinct) views or poses for the requested solve."""


class PoorCoverageError(CalibrationError):
    """The views do not cover the image or the range of board tilts well enough."""


class ResidualTooLargeError(CalibrationError):
    """A solver converged but its residual exceeds the stated refusal threshold."""


class DegenerateMotionError(CalibrationError):
    """Robot motions (hand-eye) or belt samples do not excite every unknown."""


class DepthImageError(CalibrationError):
    """A depth image has the wrong dtype/encoding/shape or holds no valid depth."""


class RegistrationError(CalibrationError):
    """Scene registration failed: too few points, low fitness or an unobservable pose."""


class BlurEstimationError(CalibrationError):
    """Blur could not be estimated: too few usable edges or squares too small in the image."""


class ArtifactError(CalibrationError):
    """A grounding artifact file is missing, malformed, of an unknown schema or inconsistent."""


class BoardUnavailableError(CalibrationError):
    """A board step was asked for but the cell has no way to show a calibration board."""
