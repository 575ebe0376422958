"""The view's parameters: where the viewer serves, and how much of each stream it shows.

One schema per concern: :class:`ServerConfig` (host, ports, memory of the Rerun server; the
command line and the node share it) and :class:`ViewerNodeConfig` (the node: the server's
fields plus how often the fast streams are drawn). ROS-free.
"""

from __future__ import annotations

import ipaddress

from pydantic import Field, field_validator, model_validator
from r2s2r_common.config import ConfigModel

DEFAULT_HOST = "127.0.0.1"
"""Loopback only: the view is reachable from this machine unless the operator opens it."""
DEFAULT_WEB_PORT = 9090
"""Rerun's default web-viewer port."""
DEFAULT_GRPC_PORT = 9876
"""Rerun's default data (gRPC) port."""


class ServerConfig(ConfigModel):
    """Where and how the Rerun server (web viewer + its data port) runs."""

    host: str = Field(
        default=DEFAULT_HOST,
        description="IP address the web viewer and its data port bind to. 127.0.0.1 (default) "
        "serves this machine only; 0.0.0.0 opens both to the network.",
    )
    web_port: int = Field(
        default=DEFAULT_WEB_PORT,
        ge=1,
        le=65535,
        description="TCP port of the web viewer (HTTP): open http://HOST:WEB_PORT.",
    )
    grpc_port: int = Field(
        default=DEFAULT_GRPC_PORT,
        ge=1,
        le=65535,
        description="TCP port of the viewer's data stream (Rerun gRPC proxy) the browser reads.",
    )
    server_memory_limit: str = Field(
        default="1GiB",
        description="Most memory the Rerun server keeps for viewers that connect late (e.g. "
        "'1GiB', '25%'); the oldest data is dropped beyond it.",
    )

    @field_validator("host")
    @classmethod
    def _ip_address(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an IP address (e.g. 127.0.0.1)") from None
        return value

    @model_validator(mode="after")
    def _distinct_ports(self) -> ServerConfig:
        if self.web_port == self.grpc_port:
            raise ValueError(
                f"web_port and grpc_port are both {self.web_port}: give the two servers "
                "different ports"
            )
        return self


class ViewerNodeConfig(ServerConfig):
    """Parameters of the ``viewer`` node (the server's, and how often fast streams are drawn)."""

    image_period_s: float = Field(
        default=0.2,
        ge=0.0,
        le=10.0,
        description="Shortest time between two drawn frames of one camera (s); frames in "
        "between are dropped undecoded (0: every frame; the cameras run at 30 Hz).",
    )
    joint_state_period_s: float = Field(
        default=0.05,
        gt=0.0,
        le=1.0,
        description="How often the queued joint states are taken and the newest one drawn "
        "(s): one robot pose per period, whatever the joint-state rate.",
    )
