import numpy as np
import pytest
from r2s2r_policy.data.chunks import action_chunk
from r2s2r_policy.normalization import RunningStats
from r2s2r_policy.sampling import MixtureSampler
from r2s2r_policy.training_data import source_sample_counts


@pytest.mark.parametrize("sim_ratio", [0.5, 0.2, 0.9])
def test_sampler_draws_sources_at_configured_ratio(sim_ratio: float) -> None:
    sampler = MixtureSampler([300, 4500], [1.0 - sim_ratio, sim_ratio], num_samples=10_000, seed=7)
    counts = source_sample_counts(sampler, 10_000)
    assert counts.sum() == 10_000
    assert abs(counts[1] / 10_000 - sim_ratio) <= 0.02
    # Within a source, frames are drawn uniformly with replacement: the number of distinct
    # real frames seen matches the coupon-collector expectation.
    indices = np.fromiter(iter(sampler), dtype=np.int64)
    real = indices[indices < 300]
    expected_unique = 300 * (1.0 - (1.0 - 1.0 / 300) ** len(real))
    assert abs(len(np.unique(real)) - expected_unique) < 0.04 * expected_unique


def test_sampler_is_deterministic_resumable_and_sharded() -> None:
    sizes, weights = [50, 70], [0.3, 0.7]
    full = list(MixtureSampler(sizes, weights, num_samples=1000, seed=1, block_size=64))
    assert full == list(MixtureSampler(sizes, weights, num_samples=1000, seed=1, block_size=64))
    assert full != list(MixtureSampler(sizes, weights, num_samples=1000, seed=2, block_size=64))
    resumed = list(
        MixtureSampler(sizes, weights, num_samples=1000, seed=1, start_sample=333, block_size=64)
    )
    assert resumed == full[333:]
    shards = [
        list(MixtureSampler(sizes, weights, 500, seed=1, rank=r, num_replicas=2, block_size=64))
        for r in range(2)
    ]
    interleaved = [index for pair in zip(*shards, strict=True) for index in pair]
    assert interleaved == full
    assert all(0 <= i < 120 for i in full)


def test_sampler_rejects_bad_weights() -> None:
    with pytest.raises(ValueError, match="2 source sizes but 1 weights"):
        MixtureSampler([1, 2], [1.0], 10, seed=0)
    with pytest.raises(ValueError, match="positive sum"):
        MixtureSampler([1, 2], [0.0, 0.0], 10, seed=0)
    with pytest.raises(ValueError, match=r"source 1 has weight 0\.5 but 0 samples"):
        MixtureSampler([5, 0], [0.5, 0.5], 10, seed=0)
    only_real = MixtureSampler([5, 0], [1.0, 0.0], 100, seed=0)
    assert max(only_real) < 5


def test_action_chunk_pads_with_last_action_and_masks() -> None:
    actions = np.arange(10, dtype=np.float32).reshape(5, 2)
    chunk, mask = action_chunk(actions, 3, 4)
    np.testing.assert_array_equal(chunk, [[6, 7], [8, 9], [8, 9], [8, 9]])
    np.testing.assert_array_equal(mask, [True, True, False, False])
    chunk, mask = action_chunk(actions, 0, 3)
    np.testing.assert_array_equal(chunk, actions[:3])
    assert mask.all()


def test_running_stats_match_numpy_over_batches_and_merge() -> None:
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(1000, 3))
    running = RunningStats(3)
    for part in np.array_split(data, 7):
        running.update(part)
    other = RunningStats(3)
    other.update(data[:10])
    merged = RunningStats(3)
    merged.update(data[10:])
    merged.merge(other)
    for stats in (running.finish(), merged.finish()):
        np.testing.assert_allclose(stats.mean, data.mean(0), rtol=1e-10)
        np.testing.assert_allclose(stats.std, data.std(0), rtol=1e-10)
        np.testing.assert_allclose(stats.min, data.min(0))
        np.testing.assert_allclose(stats.max, data.max(0))
    with pytest.raises(ValueError, match=r"expected \(N, 3\)"):
        running.update(np.zeros((4, 2)))
    with pytest.raises(ValueError, match="NaN"):
        running.update(np.array([[np.nan, 0.0, 0.0]]))
