"""2-D maps of latents: fit once on the training frames, then place rollout frames on the map.

A :class:`Projection` is fit on the training frames (real and simulated dataset frames) and
only *applied* to rollout frames (:meth:`Projection.transform`), so every rollout lands on the
same map and a rollout never moves the training frames. Latents are standardised with the
training frames' per-dimension mean and standard deviation first.

- :class:`PcaProjection` (NumPy SVD, always available) keeps the explained variance of its two
  components;
- :class:`UmapProjection` (package ``umap-learn``) and :class:`TsneProjection` (package
  ``openTSNE``) are optional: :func:`make_projection` falls back to PCA when the package is not
  installed and says so in one line.

A 2-D picture is an illustration: two domains that overlap on it may still be told apart by a
probe (:func:`~r2s2r_policy.analysis.domain.probe_accuracy`).
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

ProjectionKind = Literal["pca", "umap", "tsne"]
PROJECTION_KINDS: tuple[ProjectionKind, ...] = ("pca", "umap", "tsne")
OPTIONAL_PACKAGES: dict[str, tuple[str, str]] = {
    "umap": ("umap", "umap-learn"),
    "tsne": ("openTSNE", "openTSNE"),
}
"""Projection kind -> (module imported, package to install) for the optional projections."""


def _as_frames(frames: NDArray, what: str) -> FloatArray:
    x = np.asarray(frames, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"{what}: expected an (N, D) array, got shape {x.shape}")
    bad = int(np.count_nonzero(~np.isfinite(x).all(axis=1)))
    if bad:
        raise ValueError(f"{what}: {bad} of {len(x)} rows have non-finite values")
    return x


class Projection(ABC):
    """A 2-D map fit on training frames and applied, unchanged, to other frames.

    Attributes:
        kind: ``pca``, ``umap`` or ``tsne``.

    """

    kind: ClassVar[ProjectionKind]

    def __init__(self) -> None:
        self._mean: FloatArray | None = None
        self._scale: FloatArray | None = None
        self._train_embedding: FloatArray | None = None

    @property
    def fitted(self) -> bool:
        """Whether :meth:`fit` has run."""
        return self._train_embedding is not None

    @property
    def train_embedding(self) -> FloatArray:
        """Return the ``(N, 2)`` map positions of the training frames (a copy).

        Raises:
            RuntimeError: If the projection is not fitted.

        """
        if self._train_embedding is None:
            raise RuntimeError(f"{self.kind} projection is not fitted: call fit(train) first")
        return self._train_embedding.copy()

    @property
    def axis_labels(self) -> tuple[str, str]:
        """Labels of the two map axes."""
        name = self.kind.upper() if self.kind != "tsne" else "t-SNE"
        return f"{name} 1", f"{name} 2"

    def fit(self, train: NDArray) -> FloatArray:
        """Fit the map on the training frames and return their ``(N, 2)`` positions.

        Args:
            train: ``(N, D)`` latents of the training frames (N >= 3, D >= 2).

        Raises:
            ValueError: If ``train`` is not a finite ``(N, D)`` array of that size.
            RuntimeError: If already fitted (a map is fit once; make a new projection).

        """
        if self.fitted:
            raise RuntimeError(
                f"{self.kind} projection is already fitted: transform() other frames, "
                "or make a new projection to fit other training frames"
            )
        x = _as_frames(train, "training frames")
        if len(x) < 3 or x.shape[1] < 2:
            raise ValueError(
                f"training frames: need at least 3 frames of at least 2 dimensions, "
                f"got shape {x.shape}"
            )
        mean = x.mean(axis=0)
        scale = x.std(axis=0)
        # A dimension constant over the training frames carries no map information: keep it
        # unscaled rather than dividing by zero.
        scale[scale == 0.0] = 1.0
        self._mean, self._scale = mean, scale
        embedding = np.array(self._fit((x - mean) / scale), dtype=np.float64)
        self._train_embedding = embedding
        return embedding.copy()

    def transform(self, frames: NDArray) -> FloatArray:
        """Place other frames on the fitted map (the map itself does not change).

        Args:
            frames: ``(M, D)`` latents, D as in the training frames (M may be 0).

        Returns:
            ``(M, 2)`` map positions.

        Raises:
            RuntimeError: If the projection is not fitted.
            ValueError: If ``frames`` is not a finite ``(M, D)`` array.

        """
        if self._mean is None or self._scale is None:
            raise RuntimeError(f"{self.kind} projection is not fitted: call fit(train) first")
        x = _as_frames(frames, "frames to transform")
        if x.shape[1] != len(self._mean):
            raise ValueError(
                f"frames to transform: {x.shape[1]} dimensions, the map was fit on "
                f"{len(self._mean)}"
            )
        if len(x) == 0:
            return np.zeros((0, 2))
        return np.asarray(self._transform((x - self._mean) / self._scale), dtype=np.float64)

    @abstractmethod
    def _fit(self, standardised: FloatArray) -> FloatArray:
        """Fit on standardised training frames and return their positions."""

    @abstractmethod
    def _transform(self, standardised: FloatArray) -> FloatArray:
        """Return the positions of standardised frames on the fitted map."""


class PcaProjection(Projection):
    """The first two principal components of the standardised training frames (NumPy SVD).

    Each axis's sign is fixed so that its largest loading is positive (the same map from the
    same frames).

    Attributes:
        components: ``(2, D)`` unit axes in standardised latent space (after :meth:`fit`).
        explained_variance: Variance of the training frames along each axis.
        explained_variance_ratio: That variance as a share of the total standardised variance.

    """

    kind: ClassVar[ProjectionKind] = "pca"

    def __init__(self) -> None:
        super().__init__()
        self.components: FloatArray | None = None
        self.explained_variance: FloatArray | None = None
        self.explained_variance_ratio: FloatArray | None = None

    @property
    def axis_labels(self) -> tuple[str, str]:
        """``PC1 (43 %)``-style labels (the share of variance once fitted)."""
        if self.explained_variance_ratio is None:
            return "PC1", "PC2"
        first, second = self.explained_variance_ratio
        return f"PC1 ({100 * first:.0f} %)", f"PC2 ({100 * second:.0f} %)"

    def _fit(self, standardised: FloatArray) -> FloatArray:
        _, singular, vt = np.linalg.svd(standardised, full_matrices=False)
        axes = vt[:2].copy()
        largest = axes[np.arange(2), np.argmax(np.abs(axes), axis=1)]
        axes *= np.where(largest < 0.0, -1.0, 1.0)[:, None]
        variance = singular**2 / (len(standardised) - 1)
        self.components = axes
        self.explained_variance = variance[:2].copy()
        total = float(variance.sum())
        self.explained_variance_ratio = variance[:2] / total if total > 0 else np.zeros(2)
        return self._transform(standardised)

    def _transform(self, standardised: FloatArray) -> FloatArray:
        assert self.components is not None
        return standardised @ self.components.T


class UmapProjection(Projection):
    """UMAP (``umap-learn``): a neighbourhood-preserving map with a ``transform`` for new frames.

    Raises:
        ImportError: When ``umap-learn`` is not installed (on construction).

    """

    kind: ClassVar[ProjectionKind] = "umap"

    def __init__(self, seed: int = 0, neighbours: int = 15) -> None:
        super().__init__()
        self._umap: Any = importlib.import_module("umap")
        self.seed = seed
        self.neighbours = neighbours
        self._model: Any = None

    def _fit(self, standardised: FloatArray) -> FloatArray:
        self._model = self._umap.UMAP(
            n_components=2,
            n_neighbors=min(self.neighbours, len(standardised) - 1),
            random_state=self.seed,
            n_jobs=1,  # a seed makes UMAP single-threaded anyway; saying so silences its warning
        )
        return np.asarray(self._model.fit_transform(standardised), dtype=np.float64)

    def _transform(self, standardised: FloatArray) -> FloatArray:
        return np.asarray(self._model.transform(standardised), dtype=np.float64)


class TsneProjection(Projection):
    """t-SNE (``openTSNE``): the training embedding, with new frames placed by ``transform``.

    Raises:
        ImportError: When ``openTSNE`` is not installed (on construction).

    """

    kind: ClassVar[ProjectionKind] = "tsne"

    def __init__(self, seed: int = 0, perplexity: float = 30.0) -> None:
        super().__init__()
        self._open_tsne: Any = importlib.import_module("openTSNE")
        self.seed = seed
        self.perplexity = perplexity
        self._embedding: Any = None

    def _fit(self, standardised: FloatArray) -> FloatArray:
        # openTSNE needs 3 * perplexity < N: few frames get a smaller perplexity.
        perplexity = min(self.perplexity, (len(standardised) - 1) / 3.0)
        model = self._open_tsne.TSNE(n_components=2, perplexity=perplexity, random_state=self.seed)
        embedding = model.fit(standardised)
        # openTSNE's transform centres the training embedding's bounding box on the origin, in
        # place: centre it now, so the training positions and the frames placed later share
        # one frame.
        embedding -= (np.max(embedding, axis=0) + np.min(embedding, axis=0)) / 2
        self._embedding = embedding
        return np.array(embedding, dtype=np.float64)

    def _transform(self, standardised: FloatArray) -> FloatArray:
        return np.asarray(self._embedding.transform(standardised), dtype=np.float64)


def make_projection(kind: ProjectionKind, seed: int = 0) -> tuple[Projection, str | None]:
    """Make an unfitted projection of ``kind``, or PCA when its package is not installed.

    Args:
        kind: ``pca``, ``umap`` (package ``umap-learn``) or ``tsne`` (package ``openTSNE``).
        seed: Random seed of UMAP and t-SNE (PCA is deterministic).

    Returns:
        The projection and ``None``, or a :class:`PcaProjection` and the one line to show
        saying which package is missing and how to install it.

    Raises:
        ValueError: If ``kind`` is not one of :data:`PROJECTION_KINDS`.

    """
    if kind == "pca":
        return PcaProjection(), None
    if kind not in OPTIONAL_PACKAGES:
        raise ValueError(
            f"unknown projection kind {kind!r}: expected one of {', '.join(PROJECTION_KINDS)}"
        )
    try:
        projection: Projection = (
            UmapProjection(seed=seed) if kind == "umap" else TsneProjection(seed=seed)
        )
    except ImportError:
        package = OPTIONAL_PACKAGES[kind][1]
        return PcaProjection(), (
            f"{kind} projection needs the package {package}, which is not installed: "
            f"using PCA instead (install it with `.venv/bin/pip install {package}`)"
        )
    return projection, None
