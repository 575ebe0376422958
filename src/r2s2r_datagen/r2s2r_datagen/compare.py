"""Compare two generated datasets episode by episode (a cluster's run against a local one).

Merged datasets hold their episodes in the order they finished, which depends on the workers;
episodes are therefore matched by their job's episode index (``provenance.job.episode_index``
in each episode's metadata). Every array of a matched pair is compared (largest absolute
difference, and whether it is equal bit for bit), and so are the episodes' attributes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np


@dataclass
class DatasetComparison:
    """What differs between two datasets.

    Attributes:
        episodes_a: Episode indices of the first dataset, sorted.
        episodes_b: Episode indices of the second dataset, sorted.
        max_abs_difference: Array path under the episode (``obs/joint_pos_rad``) → largest
            absolute difference over the matched episodes.
        bit_identical_arrays: Arrays compared that were equal bit for bit.
        arrays_compared: Arrays compared in all.
        differences: One line per mismatch that no tolerance excuses: an episode in one
            dataset only, an array in one episode only or of another shape or type, an
            attribute that differs.

    """

    episodes_a: list[int]
    episodes_b: list[int]
    max_abs_difference: dict[str, float] = field(default_factory=dict)
    bit_identical_arrays: int = 0
    arrays_compared: int = 0
    differences: list[str] = field(default_factory=list)

    @property
    def largest_difference(self) -> float:
        """Largest absolute difference of any array (0 when all are equal)."""
        return max(self.max_abs_difference.values(), default=0.0)

    def same(self, tolerance: float = 1e-6) -> bool:
        """Whether both hold the same episodes with arrays equal within ``tolerance``."""
        return not self.differences and self.largest_difference <= tolerance


def _episodes(handle: h5py.File, path: Path) -> dict[int, h5py.Group]:
    out: dict[int, h5py.Group] = {}
    for name, group in handle["data"].items():
        metadata = json.loads(group.attrs["metadata"])
        index = int(metadata["provenance"]["job"]["episode_index"])
        if index in out:
            raise ValueError(f"{path}: episode {index} twice ({name} and another demo)")
        out[index] = group
    return out


def _arrays(group: h5py.Group) -> dict[str, h5py.Dataset]:
    found: dict[str, h5py.Dataset] = {}

    def visit(name: str, item: Any) -> None:
        if isinstance(item, h5py.Dataset):
            found[name] = item

    group.visititems(visit)
    return found


def _attributes(group: h5py.Group) -> dict[str, Any]:
    return {key: np.asarray(value).tolist() for key, value in group.attrs.items()}


def compare_datasets(a: str | Path, b: str | Path) -> DatasetComparison:
    """Compare two merged generation datasets (``datasets/<configuration>.hdf5``).

    Raises:
        OSError: A file cannot be read.
        KeyError, ValueError: A file is not a generated dataset (no ``data`` group, episodes
            without an episode index, an index twice).

    """
    path_a, path_b = Path(a), Path(b)
    with h5py.File(path_a, "r") as file_a, h5py.File(path_b, "r") as file_b:
        episodes_a, episodes_b = _episodes(file_a, path_a), _episodes(file_b, path_b)
        result = DatasetComparison(sorted(episodes_a), sorted(episodes_b))
        for index in sorted(set(episodes_a) ^ set(episodes_b)):
            where = path_a if index in episodes_a else path_b
            result.differences.append(f"episode {index}: only in {where}")
        for index in sorted(set(episodes_a) & set(episodes_b)):
            group_a, group_b = episodes_a[index], episodes_b[index]
            if _attributes(group_a) != _attributes(group_b):
                result.differences.append(f"episode {index}: attributes differ")
            arrays_a, arrays_b = _arrays(group_a), _arrays(group_b)
            for name in sorted(set(arrays_a) ^ set(arrays_b)):
                result.differences.append(f"episode {index}: {name} in one dataset only")
            for name in sorted(set(arrays_a) & set(arrays_b)):
                value_a, value_b = arrays_a[name][()], arrays_b[name][()]
                if value_a.shape != value_b.shape or value_a.dtype != value_b.dtype:
                    result.differences.append(
                        f"episode {index}: {name} is {value_a.shape} {value_a.dtype} vs "
                        f"{value_b.shape} {value_b.dtype}"
                    )
                    continue
                result.arrays_compared += 1
                if np.array_equal(value_a, value_b, equal_nan=value_a.dtype.kind == "f"):
                    result.bit_identical_arrays += 1
                    difference = 0.0
                elif value_a.dtype.kind in "fiub":
                    difference = float(
                        np.nanmax(np.abs(value_a.astype(np.float64) - value_b.astype(np.float64)))
                    )
                else:
                    result.differences.append(f"episode {index}: {name} differs")
                    continue
                previous = result.max_abs_difference.get(name, 0.0)
                result.max_abs_difference[name] = max(previous, difference)
    return result
