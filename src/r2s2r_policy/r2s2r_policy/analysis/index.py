"""The live real/sim monitor: a kNN index of a policy's training latents, shipped in its checkpoint.

A :class:`LatentIndex` holds the latents (:meth:`~r2s2r_policy.models.Policy.embed`) of frames
of the policy's real and simulated training data, as many of each (at most ``per_domain``,
subsampled deterministically), so that chance is one half. The *real-likeness* of a latent is
the share of real latents among its ``k`` nearest (Euclidean) neighbours:

- 1: the policy sees what it saw in the real demonstrations;
- 0.5: its real and simulated training data are indistinguishable there;
- 0: it sees what it saw in the simulated data (it is running on sim-derived behavior).

Beside it, the distance to the nearest real latent (how far from every real demonstration).
It is the live counterpart of :func:`~r2s2r_policy.analysis.domain.knn_real_share`, for one
query per inference: brute force in float32 on centred vectors with their squared norms
precomputed: about 0.25 ms per inference for 2 x 2048 latents of width ~150 on one core of
the 2-core machine, most of it reading the index (2.4 MB) back from memory after the model ran
(0.07 ms when it is still cached; ``bench/bench_monitor.py``).

The index is saved as ``latent_index.npz`` inside the checkpoint directory
(:meth:`LatentIndex.save`, written whole or not at all) with the fingerprint of the weights it
was built with; :func:`load_latent_index` refuses it for other weights or another latent width.
``r2s2r analyze index CHECKPOINT --real D --sim D`` builds it; the ``policy_inference`` node
judges every inference with it (:class:`LiveLikenessMonitor`, the engine's
:class:`~r2s2r_policy.inference.engine.LatentMonitor`) and publishes the result on
``/diagnostics``.
"""

from __future__ import annotations

import json
import threading
import zipfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from numpy.typing import NDArray

from ..models import Policy
from ..models.base import policy_fingerprint
from ..npz_files import write_npz
from .embeddings import REAL, SIM, AnalysisInputError, FrameSet, embed_observations

LATENT_INDEX_FILE = "latent_index.npz"
"""File name of the index inside a checkpoint directory."""
LATENT_INDEX_FORMAT = 1
DEFAULT_K = 10
DEFAULT_PER_DOMAIN = 2048

Float32Array = NDArray[np.float32]


class LatentIndexError(AnalysisInputError):
    """A latent index is of other weights, of another latent width, or not an index."""


@dataclass(frozen=True)
class LatentQuery:
    """The index's judgement of one latent.

    Attributes:
        real_likeness: Share of real latents among the k nearest, in [0, 1] (NaN for a
            non-finite latent).
        nearest_real_distance: Euclidean distance to the nearest real latent (latent units).

    """

    real_likeness: float
    nearest_real_distance: float


class LatentIndex:
    """Class-balanced kNN index of real and simulated latents (see the module docstring).

    Args:
        real: ``(N, D)`` latents of real frames.
        sim: ``(N, D)`` latents of simulated frames (as many as real).
        k: Neighbours judged per query.
        fingerprint: :func:`~r2s2r_policy.models.base.policy_fingerprint` of the weights
            that made the latents ("" when unknown).
        sources: Where the latents came from (dataset paths per domain), kept in the file.

    Raises:
        AnalysisInputError: Empty or unequal sets, other widths, non-finite values, or ``k``
            outside ``1..2N``.

    """

    def __init__(
        self,
        real: NDArray[np.floating],
        sim: NDArray[np.floating],
        k: int = DEFAULT_K,
        fingerprint: str = "",
        sources: dict[str, str] | None = None,
    ) -> None:
        a = np.asarray(real, dtype=np.float32)
        b = np.asarray(sim, dtype=np.float32)
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
            raise AnalysisInputError(
                f"latent index: expected (N, D) real and sim latents, got {a.shape} and {b.shape}"
            )
        if len(a) == 0 or len(b) == 0:
            raise AnalysisInputError(
                f"latent index: need both domains, got {len(a)} real and {len(b)} sim latents"
            )
        if len(a) != len(b):
            raise AnalysisInputError(
                f"latent index: expected as many real as sim latents, got {len(a)} and {len(b)}"
            )
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            raise AnalysisInputError("latent index: non-finite values in the latents")
        if not 1 <= k <= 2 * len(a):
            raise AnalysisInputError(f"latent index: k = {k}, expected 1..{2 * len(a)}")
        self.real = a
        self.sim = b
        self.k = int(k)
        self.fingerprint = fingerprint
        self.sources = dict(sources or {})
        both = np.vstack([a, b])
        # Centred: float32 squared distances lose less to cancellation near the data.
        self._center = both.mean(axis=0, dtype=np.float64).astype(np.float32)
        self._train = np.ascontiguousarray(both - self._center)
        self._train_sq = np.einsum("ij,ij->i", self._train, self._train)
        self._train_torch = torch.from_numpy(self._train)  # the same memory

    @property
    def per_domain(self) -> int:
        """Latents per domain."""
        return len(self.real)

    @property
    def latent_dim(self) -> int:
        """Width of the latents."""
        return int(self.real.shape[1])

    def query(self, latent: NDArray[np.floating]) -> LatentQuery:
        """Judge one latent ``(latent_dim,)``: real-likeness and nearest-real distance.

        Raises:
            ValueError: If the latent is not ``(latent_dim,)``.

        """
        q = np.asarray(latent, dtype=np.float32)
        if q.shape != (self.latent_dim,):
            raise ValueError(f"latent index: query {q.shape}, expected ({self.latent_dim},)")
        if not np.isfinite(q).all():
            return LatentQuery(float("nan"), float("nan"))
        q = q - self._center
        # |t - q|² = |t|² - 2 t·q + |q|²; the last term is the same for every t. The product
        # runs on torch's intra-op threads (the node sets them), not NumPy's BLAS pool: its
        # threads, woken per query, took 10-20 ms at p99 on a loaded 2-core machine.
        products = torch.mv(self._train_torch, torch.from_numpy(q)).numpy()
        partial = self._train_sq - 2.0 * products
        nearest = np.argpartition(partial, self.k - 1)[: self.k]
        n = self.per_domain
        share = np.count_nonzero(nearest < n) / self.k
        # The norm trick ranks; the distance itself is taken directly (no cancellation).
        closest_real = self._train[int(np.argmin(partial[:n]))]
        return LatentQuery(float(share), float(np.linalg.norm(closest_real - q)))

    def real_likeness(self, latent: NDArray[np.floating]) -> float:
        """Share of real latents among the k nearest of ``latent`` (the engine's monitor)."""
        return self.query(latent).real_likeness

    def leave_one_out(self, block: int = 256) -> tuple[Float32Array, Float32Array]:
        """Real-likeness of every indexed latent against the others (itself left out).

        A sanity figure: near 1 for real and 0 for sim latents when the policy tells the
        domains apart, near 0.5 for both when it does not. Neighbouring frames of one episode
        are near each other, so it is optimistic about how well new frames are told apart.

        Returns:
            ``(real_shares (N,), sim_shares (N,))``.

        """
        total = len(self._train)
        if self.k > total - 1:
            raise AnalysisInputError(
                f"latent index: k = {self.k} leaves no room to leave one out of {total}"
            )
        shares = np.empty(total, dtype=np.float32)
        for start in range(0, total, block):
            rows = self._train[start : start + block]
            partial = self._train_sq[None, :] - 2.0 * (rows @ self._train.T)
            own = np.arange(start, start + len(rows))
            partial[np.arange(len(rows)), own] = np.inf
            nearest = np.argpartition(partial, self.k - 1, axis=1)[:, : self.k]
            shares[start : start + len(rows)] = (nearest < self.per_domain).mean(axis=1)
        return shares[: self.per_domain], shares[self.per_domain :]

    def save(self, checkpoint_dir: str | Path) -> Path:
        """Write ``latent_index.npz`` into a checkpoint directory, whole or not at all.

        Raises:
            FileNotFoundError: If the checkpoint directory does not exist.

        """
        directory = Path(checkpoint_dir)
        if not directory.is_dir():
            raise FileNotFoundError(f"{directory}: no such checkpoint directory")
        header = {
            "format": LATENT_INDEX_FORMAT,
            "fingerprint": self.fingerprint,
            "latent_dim": self.latent_dim,
            "k": self.k,
            "per_domain": self.per_domain,
            "sources": self.sources,
        }
        return write_npz(
            directory / LATENT_INDEX_FILE, header, {"real": self.real, "sim": self.sim}
        )


def balanced_rows(count: int, per_domain: int, seed: int = 0) -> NDArray[np.int64]:
    """Return ``min(count, per_domain)`` row indices of ``count``, sorted, the same every time."""
    if count <= per_domain:
        return np.arange(count)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(count, size=per_domain, replace=False))


def build_latent_index(
    policy: Policy,
    real: FrameSet,
    sim: FrameSet,
    k: int = DEFAULT_K,
    per_domain: int = DEFAULT_PER_DOMAIN,
    seed: int = 0,
    batch_size: int = 256,
    progress: Callable[[int, int], None] | None = None,
) -> LatentIndex:
    """Embed real and simulated frames with a policy and index them, class-balanced.

    Each domain keeps ``min(len(real), len(sim), per_domain)`` frames (chosen with ``seed``);
    only those are embedded.

    Args:
        policy: The policy whose latents are indexed.
        real: Frames of its real training data (domain :data:`~.embeddings.REAL`).
        sim: Frames of its simulated training data (domain :data:`~.embeddings.SIM`).
        k: Neighbours judged per query.
        per_domain: Most latents per domain.
        seed: Seed of the subsampling.
        batch_size: Frames embedded at once.
        progress: Called with (frames embedded, frames to embed) after each batch.

    Raises:
        AnalysisInputError: A domain with no frames (a real-only policy has no sim data to
            tell apart), swapped domains, frames that do not fit the policy, or a bad ``k`` /
            ``per_domain``.

    """
    for frames, domain in ((real, REAL), (sim, SIM)):
        if frames.domain != domain:
            raise AnalysisInputError(
                f"frames of {frames.name!r} are {frames.domain}, expected {domain} here"
            )
    if len(real) == 0 or len(sim) == 0:
        raise AnalysisInputError(
            f"latent index: need both domains, got {len(real)} real and {len(sim)} sim frames "
            "(a real-only policy has no simulated data to tell its inputs from)"
        )
    if per_domain < 1:
        raise AnalysisInputError(f"per_domain = {per_domain}: expected >= 1")
    real.check_fits(policy.spec)
    sim.check_fits(policy.spec)
    count = min(len(real), len(sim), per_domain)
    if not 1 <= k <= 2 * count:
        raise AnalysisInputError(f"k = {k}: expected 1..{2 * count} ({count} frames per domain)")
    chosen = [
        {
            key: values[balanced_rows(len(frames), count, seed)]
            for key, values in frames.observations.items()
        }
        for frames in (real, sim)
    ]
    latents: list[Float32Array] = []
    done = 0
    for observations in chosen:
        parts = []
        for start in range(0, count, batch_size):
            block = {
                key: values[start : start + batch_size] for key, values in observations.items()
            }
            parts.append(embed_observations(policy, block, batch_size))
            done += len(parts[-1])
            if progress is not None:
                progress(done, 2 * count)
        latents.append(np.concatenate(parts))

    return LatentIndex(
        latents[0],
        latents[1],
        k,
        policy_fingerprint(policy),
        sources={REAL: real.name, SIM: sim.name},
    )


def load_latent_index(checkpoint_dir: str | Path, policy: Policy) -> LatentIndex | None:
    """Read a checkpoint's ``latent_index.npz`` for its policy; None when it has none.

    Raises:
        LatentIndexError: If the file is not an index of this format, or was built with other
            weights or for another latent width (one line naming the file and what differs).

    """
    path = Path(checkpoint_dir) / LATENT_INDEX_FILE
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
            real, sim = data["real"], data["sim"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        # A truncated or overwritten file: zipfile's and numpy's errors, named in one line.
        raise LatentIndexError(
            f"{path}: not a latent index ({type(error).__name__}: {error})"
        ) from None
    if header.get("format") != LATENT_INDEX_FORMAT:
        raise LatentIndexError(
            f"{path}: format {header.get('format')}, expected {LATENT_INDEX_FORMAT}"
        )

    differ = []
    if header.get("latent_dim") != policy.latent_dim:
        differ.append(f"latent width {header.get('latent_dim')}, the policy's {policy.latent_dim}")
    fingerprint = policy_fingerprint(policy)
    if header.get("fingerprint") != fingerprint:
        differ.append(f"weights {header.get('fingerprint')}, the checkpoint's {fingerprint}")
    if differ:
        raise LatentIndexError(
            f"{path}: built for another policy ({'; '.join(differ)}); rebuild it with "
            f"'r2s2r analyze index {Path(checkpoint_dir)}'"
        )
    return LatentIndex(
        real, sim, int(header["k"]), header["fingerprint"], dict(header.get("sources", {}))
    )


@dataclass(frozen=True)
class MonitorReading:
    """One inference's judgement, as the live monitor publishes it.

    Attributes:
        real_likeness: This inference's real-likeness.
        nearest_real_distance: Its latent's distance to the nearest real latent.
        running_mean: Mean real-likeness over the last ``window`` inferences (this one in).
        judged: Inferences judged since the monitor started.

    """

    real_likeness: float
    nearest_real_distance: float
    running_mean: float
    judged: int


class LiveLikenessMonitor:
    """The engine's monitor that hands each judgement to a publisher on another thread.

    The engine calls :meth:`real_likeness` on its worker after the command is sent; the query
    is queued and ``notify`` is called (e.g. a ROS guard condition's trigger). The publisher
    calls :meth:`take` on its own thread: the running mean is updated there, so the engine's
    thread does no more than the query.

    Args:
        index: The index judging latents.
        window: Inferences in the running mean.
        notify: Called (from the engine's thread) after each judgement.
        max_pending: Judgements kept while nobody takes them (the oldest are dropped).

    """

    def __init__(
        self,
        index: LatentIndex,
        window: int = 30,
        notify: Callable[[], None] | None = None,
        max_pending: int = 256,
    ) -> None:
        if window < 1:
            raise ValueError(f"window = {window}: expected >= 1")
        self.index = index
        self.notify = notify
        self._pending: deque[LatentQuery] = deque(maxlen=max_pending)
        self._lock = threading.Lock()
        self._window: deque[float] = deque(maxlen=window)
        self._judged = 0

    def real_likeness(self, latent: NDArray[np.floating]) -> float:
        """Judge one latent (engine thread): queue it for :meth:`take` and return its likeness."""
        result = self.index.query(latent)
        with self._lock:
            self._pending.append(result)
        if self.notify is not None:
            self.notify()
        return result.real_likeness

    def take(self) -> list[MonitorReading]:
        """Return the judgements queued since the last call, with the running mean."""
        with self._lock:
            pending = list(self._pending)
            self._pending.clear()
        readings = []
        for result in pending:
            self._judged += 1
            if np.isfinite(result.real_likeness):
                self._window.append(result.real_likeness)
            mean = float(np.mean(self._window)) if self._window else float("nan")
            readings.append(
                MonitorReading(
                    result.real_likeness, result.nearest_real_distance, mean, self._judged
                )
            )
        return readings
