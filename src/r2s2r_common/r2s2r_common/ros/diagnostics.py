"""``/diagnostics`` messages: one status a node reports, with its values, stamped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue


def diagnostics_array(
    name: str,
    level: Any,
    message: str,
    hardware_id: str,
    values: Mapping[str, str],
    stamp: Any,
) -> DiagnosticArray:
    """Return a ``DiagnosticArray`` holding one status.

    Args:
        name: Status name (``"<node>: <what>"``).
        level: ``DiagnosticStatus.OK``, ``WARN``, ``ERROR`` or ``STALE``.
        message: One line for the operator.
        hardware_id: What the status is about (a camera, the belt, the cell).
        values: Key -> value strings, in the order given.
        stamp: ``builtin_interfaces/Time`` of the array's header.

    """
    status = DiagnosticStatus(
        level=level,
        name=name,
        message=message,
        hardware_id=hardware_id,
        values=[KeyValue(key=key, value=value) for key, value in values.items()],
    )
    array = DiagnosticArray(status=[status])
    array.header.stamp = stamp
    return array
