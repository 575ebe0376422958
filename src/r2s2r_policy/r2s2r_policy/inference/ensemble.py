"""Temporal ensembling of action chunks (ACT, Zhao et al. 2023)."""

from __future__ import annotations

from collections import deque

import numpy as np


class TemporalEnsemble:
    """The weighted mean of every stored chunk's prediction for each future step.

    A chunk is computed every control step; chunk step ``k`` is the target ``k + 1`` steps of
    ``dt_s`` after the observation it was computed from. The last ``chunk_length`` chunks are
    kept; the target of each future step is the mean of their predictions for that step,
    weights ``exp(-m·i)`` with ``i = 0`` the oldest prediction (ACT's convention).

    Args:
        chunk_length: Steps per chunk ``H`` (and chunks kept).
        dt_s: Time between chunk steps (s).
        weight_decay: ``m`` of the weights.

    """

    def __init__(self, chunk_length: int, dt_s: float, weight_decay: float) -> None:
        self.chunk_length = chunk_length
        self.dt_s = dt_s
        self.weight_decay = weight_decay
        self._chunks: deque[tuple[float, np.ndarray]] = deque(maxlen=chunk_length)

    def __len__(self) -> int:
        return len(self._chunks)

    def clear(self) -> None:
        """Forget every stored chunk (a new episode, or inputs went stale)."""
        self._chunks.clear()

    def add(self, observation_time_s: float, chunk: np.ndarray) -> np.ndarray:
        """Store a chunk and return the ensembled targets of its steps.

        Args:
            observation_time_s: Time of the observation the chunk was computed from (s).
            chunk: ``(H, A)`` predicted targets.

        Returns:
            ``(H, A)`` float64: step ``k`` is the weighted mean over the stored chunks of their
            prediction for ``observation_time_s + (k + 1)·dt_s``.

        """
        self._chunks.append((observation_time_s, chunk))
        horizon = self.chunk_length
        out = np.empty_like(chunk, dtype=np.float64)
        for step in range(horizon):
            target_s = observation_time_s + (step + 1) * self.dt_s
            predictions = []
            for chunk_time_s, stored in self._chunks:  # oldest first
                index = round((target_s - chunk_time_s) / self.dt_s) - 1
                if 0 <= index < horizon:
                    predictions.append(stored[index])
            weights = np.exp(-self.weight_decay * np.arange(len(predictions)))
            out[step] = np.average(np.stack(predictions), axis=0, weights=weights)
        return out
