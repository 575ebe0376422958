"""Where the workspace's ROS graphs talk: localhost-only discovery, and private domains.

Two rules, one home (the bring-up, its commands and the tests use them; ROS-free):

- **Localhost unless asked.** Every graph the workspace starts (``r2s2r launch``, ``r2s2r
  evaluate`` over ROS, ``experiment --ros``, the private graphs of ``record-demos`` and
  ``ground``) discovers peers on this host only (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``),
  so a twin never answers, or commands, another machine's cell on the LAN. To open it (robot
  drivers or rviz on another machine), set ``R2S2R_ROS_DISCOVERY`` to a ROS range
  (``SUBNET``, ``SYSTEM_DEFAULT``) or pass ``r2s2r launch --discovery subnet``
  (:func:`apply_discovery`).
- **Private domains are claimed.** A self-contained graph (its twin is its cell) runs in a
  domain of its own, claimed with a lock file per domain id under
  ``<tmp>/r2s2r-ros-domains/`` (:func:`claim_domain`), held while the claiming process lives:
  two jobs on one host never draw the same domain (a random draw among 200 collides once in
  200 pairs). The test suite claims its domain the same way, from the same folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import tempfile
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from r2s2r_common.errors import BadInputError

DISCOVERY_ENV = "R2S2R_ROS_DISCOVERY"
"""Opens discovery beyond this host: a ``ROS_AUTOMATIC_DISCOVERY_RANGE`` value."""
DISCOVERY_RANGES = ("LOCALHOST", "SUBNET", "SYSTEM_DEFAULT", "OFF")
"""Values ``ROS_AUTOMATIC_DISCOVERY_RANGE`` takes (Jazzy and later)."""
DEFAULT_DISCOVERY = "LOCALHOST"

DOMAIN_IDS = (*range(1, 102), *range(215, 233))
"""Domain ids a private graph is given: their DDS ports stay clear of Linux's ephemeral port
range (0, a shell's default, is never given)."""
LOCK_FOLDER_NAME = "r2s2r-ros-domains"


class DiscoveryError(BadInputError, ValueError):
    """``R2S2R_ROS_DISCOVERY`` names no discovery range (exit code 2 at the command line)."""


def discovery_range(environ: MutableMapping[str, str] | None = None) -> str:
    """Return the discovery range of the graphs: ``R2S2R_ROS_DISCOVERY``, else LOCALHOST.

    Raises:
        DiscoveryError: ``R2S2R_ROS_DISCOVERY`` is not a discovery range.

    """
    env = os.environ if environ is None else environ
    value = env.get(DISCOVERY_ENV, "").strip().upper()
    if not value:
        return DEFAULT_DISCOVERY
    if value not in DISCOVERY_RANGES:
        raise DiscoveryError(
            f"{DISCOVERY_ENV} = {env.get(DISCOVERY_ENV)!r}: expected one of "
            f"{', '.join(DISCOVERY_RANGES)}"
        )
    return value


def apply_discovery(environ: MutableMapping[str, str] | None = None) -> str:
    """Set ``ROS_AUTOMATIC_DISCOVERY_RANGE`` in ``environ`` (default: this process's) by the rule.

    Returns:
        The range set.

    """
    env = os.environ if environ is None else environ
    value = discovery_range(env)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = value
    return value


@dataclass
class DomainClaim:
    """A ROS domain id held by this process (its lock file stays locked until released).

    Attributes:
        domain_id: The claimed id.
        lock: The open, locked lock file (None: every id was held, the id is shared).

    """

    domain_id: int
    lock: IO[str] | None

    def release(self) -> None:
        """Give the id back (closing the lock file releases the lock)."""
        _HELD.pop(self.domain_id, None)
        if self.lock is not None:
            with contextlib.suppress(OSError):
                self.lock.close()
            self.lock = None


_HELD: dict[int, DomainClaim] = {}


def lock_folder() -> Path:
    """``<tmp>/r2s2r-ros-domains`` (created)."""
    folder = Path(tempfile.gettempdir()) / LOCK_FOLDER_NAME
    folder.mkdir(exist_ok=True)
    return folder


def claim_domain() -> DomainClaim:
    """Claim a domain id that no other process on this host (nor this one) holds.

    The ids are tried in random order; a lock is an exclusive ``flock`` on
    ``<tmp>/r2s2r-ros-domains/<id>.lock``, held by this open file (so by this process until
    :meth:`DomainClaim.release` or its exit, a crash included). Two claims in one process are
    two open files, hence different ids.

    Returns:
        The claim (when every id is held, an unlocked one: more graphs than ids share).

    """
    folder = lock_folder()
    candidates = list(DOMAIN_IDS)
    random.SystemRandom().shuffle(candidates)
    for domain in candidates:
        lock = (folder / f"{domain}.lock").open("w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        claim = DomainClaim(domain, lock)
        _HELD[domain] = claim
        return claim
    return DomainClaim(candidates[0], None)


def release_domain(domain_id: int) -> None:
    """Release this process's claim of ``domain_id`` (nothing if it holds none)."""
    claim = _HELD.get(domain_id)
    if claim is not None:
        claim.release()


def private_environment(base: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Return a copy of ``base`` (default: this process's environment) for a private graph.

    A claimed private ``ROS_DOMAIN_ID`` (release it with :func:`release_domain` when the graph
    is done, or let it go with this process) and the discovery range of the rule.
    """
    env = dict(os.environ if base is None else base)
    env["ROS_DOMAIN_ID"] = str(claim_domain().domain_id)
    apply_discovery(env)
    return env
