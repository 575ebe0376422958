"""The recorder's command line over datasets (``r2s2r dataset ...``) and its shipped config.

The dataset itself and the LeRobot export are tested in ``r2s2r_dataset``; these tests check
the commands that wrap them, and that ``config/nodes/recorder.yaml`` is a valid config.
"""

from pathlib import Path

from click.testing import CliRunner
from r2s2r_recorder.cli import cli
from r2s2r_testing.episodes import generated_episode, synthetic_episode, write_episodes


def test_contact_sheet_and_info_cli(tmp_path: Path) -> None:
    episodes = [
        generated_episode(seed, frames, behavior)
        for seed, frames, behavior in ((0, 12, "mimicgen"), (1, 9, "planner"))
    ]
    source = write_episodes(tmp_path / "a.hdf5", episodes)
    runner = CliRunner()
    result = runner.invoke(cli, ["dataset-info", str(source)])
    assert result.exit_code == 0, result.output
    assert "episodes  2" in result.output and "sim/planner: 1" in result.output
    out = tmp_path / "sheet.png"
    result = runner.invoke(cli, ["contact-sheet", str(source), "1", str(out)])
    assert result.exit_code == 0, result.output
    import matplotlib.image

    image = matplotlib.image.imread(out)
    assert image.shape[0] > 300 and image.shape[1] > 600
    assert image[..., :3].std() > 0.05  # frames and plots, not a blank page


def test_cli_exports_with_one_summary_line(tmp_path: Path) -> None:
    episodes = [synthetic_episode(seed, n, image_px=64) for seed, n in enumerate((5, 6))]
    source = write_episodes(tmp_path / "in.hdf5", episodes)
    result = CliRunner().invoke(
        cli, ["export-lerobot", str(source), str(tmp_path / "out"), "--codec", "h264"]
    )
    assert result.exit_code == 0, result.output
    assert "LeRobot v3.0, 2 episodes, 11 frames (real 11), h264 video" in result.output


def test_shipped_recorder_yaml_validates() -> None:
    from r2s2r_common.config import load_config
    from r2s2r_recorder.config import RecorderConfig

    path = Path(__file__).resolve().parents[3] / "config" / "nodes" / "recorder.yaml"
    config = load_config(RecorderConfig, path, "recorder")
    assert config.qos_profile("/tf_static") == "reliable_transient_local"
    assert config.qos_profile("/head_camera/image_raw") == "sensor_data"
    assert config.qos_profile("/joint_states") == "default"
    assert "/objects/tracks" in config.topics
