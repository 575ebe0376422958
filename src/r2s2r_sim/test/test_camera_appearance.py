"""A real camera's look: each step with a known answer, identity by default, seeded noise, the
family's appearance axes drawn on request only, and the twin's frames through a backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from r2s2r_sim.camera_appearance import (
    RENDER_GAMMA,
    apply_appearance,
    camera_image,
    colour_matrix,
    frame_noise_seed,
)
from r2s2r_sim.mujoco_backend import MujocoBackend
from r2s2r_sim.twin_family import (
    OUTER_FIFTH,
    check_twin,
    family_deviations,
    load_family,
    range_positions,
    sample_twin,
    write_family_twins,
)
from r2s2r_world.world import CameraAppearance, WorldParams, load_world
from sim_support import NOMINAL, REPO

FAMILY = REPO / "config" / "twin" / "family.yaml"


def grey(value: int, size: int = 32) -> np.ndarray:
    return np.full((size, size, 3), value, dtype=np.uint8)


def test_the_identity_returns_the_render_itself() -> None:
    image = np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8)
    assert apply_appearance(image, CameraAppearance(), 0) is image


def test_exposure_of_one_stop_doubles_linear_light() -> None:
    out = apply_appearance(grey(100), CameraAppearance(exposure_ev=1.0), 0)
    expected = 255.0 * (2.0 * (100 / 255.0) ** RENDER_GAMMA) ** (1.0 / RENDER_GAMMA)
    assert np.all(np.abs(out.astype(float) - expected) <= 0.5)


def test_white_balance_scales_one_channel_and_crosstalk_keeps_greys_grey() -> None:
    look = CameraAppearance(white_balance_rgb=(1.2, 1.0, 1.0))
    out = apply_appearance(grey(100), look, 0)
    assert out[..., 0].mean() > 105 and out[..., 1].mean() == 100 and out[..., 2].mean() == 100
    matrix = colour_matrix(CameraAppearance(crosstalk=0.1))
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0, atol=1e-6)
    red = np.zeros((8, 8, 3), np.uint8)
    red[..., 0] = 200
    mixed = apply_appearance(red, CameraAppearance(crosstalk=0.1), 0)
    assert mixed[..., 0].mean() < 200 and mixed[..., 1].mean() > 0
    flat = apply_appearance(grey(90), CameraAppearance(crosstalk=0.1), 0)
    assert np.ptp(flat.astype(int), axis=2).max() <= 1


def test_vignetting_darkens_the_corners_not_the_centre() -> None:
    out = apply_appearance(grey(180, 65), CameraAppearance(vignetting=0.4), 0).astype(float)
    assert abs(out[32, 32].mean() - 180) <= 1
    corner = 255 * (0.6 * (180 / 255) ** RENDER_GAMMA) ** (1 / RENDER_GAMMA)
    assert abs(out[0, 0].mean() - corner) <= 1.5


def test_noise_has_its_stated_size_and_is_seeded() -> None:
    look = CameraAppearance(read_noise=0.01)
    a = apply_appearance(grey(128, 128), look, 7).astype(float)
    b = apply_appearance(grey(128, 128), look, 7)
    c = apply_appearance(grey(128, 128), look, 8)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    # Encoded at gamma 2.2: d(encoded)/d(linear) = x**(1/g - 1) / g at the grey's linear value.
    linear = (128 / 255) ** RENDER_GAMMA
    slope = linear ** (1 / RENDER_GAMMA - 1) / RENDER_GAMMA
    assert a.std() == pytest.approx(255 * slope * 0.01, rel=0.1)


def test_gamma_black_level_and_jpeg() -> None:
    brighter = apply_appearance(grey(100), CameraAppearance(gamma=2.6), 0)
    assert brighter.mean() > 100  # a steeper tone curve lifts the mid-tones
    lifted = apply_appearance(grey(0), CameraAppearance(black_level=0.04), 0)
    assert lifted.mean() == pytest.approx(0.04 * 255, abs=0.6)
    edges = np.zeros((32, 32, 3), np.uint8)
    edges[:, 13:, 0] = 255  # an edge inside a JPEG block, in one channel (chroma subsampled)
    coded = apply_appearance(edges, CameraAppearance(jpeg_quality=30), 0)
    assert 0 < np.abs(coded.astype(int) - edges).mean() < 20


def test_auto_exposure_meters_towards_its_target() -> None:
    look = CameraAppearance(auto_exposure=1.0, auto_exposure_target=0.18)
    for value in (40, 200):
        out = apply_appearance(grey(value), look, 0)
        assert (out.mean() / 255.0) ** RENDER_GAMMA == pytest.approx(0.18, rel=0.03)


def test_motion_blur_smears_horizontally_only() -> None:
    image = np.zeros((21, 21, 3), np.uint8)
    image[10, 10] = 255
    out = apply_appearance(image, CameraAppearance(motion_blur_px=4.0), 0)
    assert out[10, 8:13].min() > 0 and out[9].max() == 0 and out[11].max() == 0


def test_frame_noise_seed_depends_on_episode_camera_and_time() -> None:
    seeds = {
        frame_noise_seed(0, 0, 0.1),
        frame_noise_seed(1, 0, 0.1),
        frame_noise_seed(0, 1, 0.1),
        frame_noise_seed(0, 0, 0.2),
    }
    assert len(seeds) == 4 and frame_noise_seed(0, 0, 0.1) == frame_noise_seed(0, 0, 0.1)


def test_bad_images_are_refused() -> None:
    with pytest.raises(ValueError, match="uint8 RGB"):
        apply_appearance(np.zeros((8, 8), np.uint8), CameraAppearance(gamma=2.0), 0)


def test_a_sampled_look_leaves_every_other_value_of_the_seed_unchanged() -> None:
    nominal, family = load_world(NOMINAL), load_family(FAMILY)
    plain = sample_twin(nominal, family, 5, OUTER_FIFTH)
    looked = sample_twin(nominal, family, 5, OUTER_FIFTH, appearance=True)
    assert plain.cameras.head.appearance.is_identity()
    assert not looked.cameras.head.appearance.is_identity()
    assert not looked.cameras.hand.appearance.is_identity()
    stripped = looked.model_copy(deep=True)
    stripped.cameras.head.appearance = CameraAppearance()
    stripped.cameras.hand.appearance = CameraAppearance()
    assert stripped == plain
    check_twin(looked, nominal, family)
    positions = range_positions(looked, nominal, family)
    look_keys = [k for k in positions if ".appearance." in k]
    assert len(look_keys) == 24
    assert all(p <= 0.2 + 1e-6 or p >= 0.8 - 1e-6 for k, p in positions.items() if k in look_keys)


def test_a_look_outside_its_range_is_named() -> None:
    nominal, family = load_world(NOMINAL), load_family(FAMILY)
    twin = sample_twin(nominal, family, 2, appearance=True)
    twin.cameras.head.appearance.shot_noise = 0.09
    lines = family_deviations(twin, nominal, family)
    assert len(lines) == 1 and lines[0].startswith("cameras.head.appearance.shot_noise = 0.09")
    twin.cameras.head.appearance.auto_exposure_target = 0.3  # not a varied key
    assert any("does not vary" in line for line in family_deviations(twin, nominal, family))


def test_written_twins_name_their_look_and_plain_ones_have_none(tmp_path: Path) -> None:
    nominal_path = REPO / "config" / "world" / "nominal.yaml"
    [plain] = write_family_twins(nominal_path, FAMILY, [1], tmp_path)
    [looked] = write_family_twins(nominal_path, FAMILY, [1], tmp_path, appearance=True)
    assert looked.name == "twin_0001_appearance.yaml"
    assert "appearance" not in yaml.safe_load(plain.read_text())["cameras"]["head"]
    data = yaml.safe_load(looked.read_text())
    assert data["cameras"]["hand"]["appearance"]["jpeg_quality"] in range(70, 96)
    assert "--appearance" in looked.read_text().splitlines()[1]
    assert load_world(looked).cameras.head.appearance != CameraAppearance()


def test_camera_image_blurs_then_applies_the_look() -> None:
    nominal = load_world(NOMINAL)
    params = nominal.cameras.head.model_copy(deep=True)
    image = np.random.default_rng(1).integers(0, 256, (128, 128, 3), dtype=np.uint8)
    assert np.array_equal(camera_image(image, params, 0, 3, 0.5), image)  # nominal: no blur
    params.appearance = CameraAppearance(shot_noise=0.01)
    first = camera_image(image, params, 0, 3, 0.5)
    assert np.array_equal(first, camera_image(image, params, 0, 3, 0.5))
    assert not np.array_equal(first, camera_image(image, params, 0, 3, 0.6))


def test_a_backend_renders_the_twin_with_its_look(nominal_world: WorldParams) -> None:
    backend, world = MujocoBackend(), nominal_world
    backend.reset(world, 4)
    plain = backend.render("head_camera")
    looked_world = world.model_copy(deep=True)
    looked_world.cameras.head.appearance = CameraAppearance(exposure_ev=1.0, read_noise=0.005)
    backend.reset(looked_world, 4)
    looked = backend.render("head_camera")
    again = backend.render("head_camera")
    assert looked.mean() > plain.mean() + 10
    assert np.array_equal(looked, again)  # the same instant of the same episode
    rgb, _ = backend.render_rgbd("head_camera")
    assert np.array_equal(rgb, looked)
    backend.close()


def test_a_shown_snapshot_renders_the_noise_of_its_own_instant(nominal_world: WorldParams) -> None:
    world = nominal_world.model_copy(deep=True)
    world.cameras.hand.appearance = CameraAppearance(read_noise=0.01)
    backend = MujocoBackend()
    backend.reset(world, 2)
    backend.step(50)
    snapshot = backend.scene_snapshot()
    live = backend.render("hand_camera")
    backend.step(50)
    assert not np.array_equal(backend.render("hand_camera"), live)
    backend.show_scene_snapshot(snapshot)
    assert np.array_equal(backend.render("hand_camera"), live)
    backend.close()
