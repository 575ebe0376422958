"""Parameters declared from a typed schema: descriptors, start-up failure, runtime refusal."""

import pytest
import rclpy
from pydantic import Field
from r2s2r_common.config import ConfigError, ConfigModel
from r2s2r_common.ros.params import LENIENT_ENV, declare_config
from rcl_interfaces.msg import ParameterType
from rclpy.parameter import Parameter


class Inner(ConfigModel):
    width_px: int = Field(default=128, ge=16, le=4096, description="Image width.")
    names: list[str] = Field(default_factory=lambda: ["a", "b"], description="Names.")


class Example(ConfigModel):
    rate_hz: float = Field(default=20.0, gt=0.0, le=1000.0, description="Publish rate.")
    enabled: bool = Field(default=True, description="Switch.")
    frame_id: str = Field(default="belt_link", description="Frame.")
    camera: Inner = Field(default_factory=Inner)


def test_declares_every_leaf_with_type_range_and_description(ros_context: rclpy.Context) -> None:
    node = rclpy.create_node("params_test", context=ros_context)
    config = declare_config(node, Example)
    assert config == Example()
    descriptor = node.describe_parameter("camera.width_px")
    assert descriptor.type == ParameterType.PARAMETER_INTEGER
    assert descriptor.integer_range[0].from_value == 16
    assert descriptor.integer_range[0].to_value == 4096
    assert node.describe_parameter("rate_hz").description == "Publish rate."
    assert node.get_parameter("camera.names").value == ["a", "b"]
    node.destroy_node()


def test_overrides_apply_and_bad_values_fail_at_startup(ros_context: rclpy.Context) -> None:
    node = rclpy.create_node(
        "params_test",
        context=ros_context,
        parameter_overrides=[Parameter("camera.width_px", value=640)],
    )
    assert declare_config(node, Example).camera.width_px == 640
    node.destroy_node()

    bad = rclpy.create_node(
        "params_bad",
        context=ros_context,
        parameter_overrides=[Parameter("rate_hz", value=-1.0)],
    )
    with pytest.raises(ConfigError, match=r"parameter rate_hz: .*-1.0"):
        declare_config(bad, Example)
    bad.destroy_node()

    wrong_type = rclpy.create_node(
        "params_type",
        context=ros_context,
        parameter_overrides=[Parameter("enabled", value="yes")],
    )
    with pytest.raises(ConfigError, match=r"parameter enabled: "):
        declare_config(wrong_type, Example)
    wrong_type.destroy_node()


def test_runtime_changes_validated_or_refused(ros_context: rclpy.Context) -> None:
    seen: list[Example] = []
    node = rclpy.create_node("params_runtime", context=ros_context)
    declare_config(node, Example, on_change=seen.append)
    ok = node.set_parameters([Parameter("rate_hz", value=50.0)])[0]
    assert ok.successful and seen[-1].rate_hz == 50.0
    refused = node.set_parameters([Parameter("camera.width_px", value=8)])[0]
    assert not refused.successful
    assert "width_px" in refused.reason
    assert node.get_parameter("camera.width_px").value == 128
    node.destroy_node()


def test_an_unknown_parameter_is_refused_with_the_closest_name(
    ros_context: rclpy.Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typo in a parameter file (``rate_hzz``) is refused, not silently replaced by a default."""
    monkeypatch.setattr("sys.argv", ["node", "--ros-args", "--params-file", "/cfg/node.yaml"])
    typo = rclpy.create_node(
        "params_typo",
        context=ros_context,
        parameter_overrides=[
            Parameter("rate_hzz", value=5.0),
            Parameter("use_sim_time", value=True),
        ],
    )
    with pytest.raises(
        ConfigError,
        match=r"unknown parameter 'rate_hzz' \(did you mean 'rate_hz'\?\) in /cfg/node.yaml",
    ):
        declare_config(typo, Example)
    typo.destroy_node()
    monkeypatch.setenv(LENIENT_ENV, "1")
    lenient = rclpy.create_node(
        "params_lenient",
        context=ros_context,
        parameter_overrides=[Parameter("rate_hzz", value=5.0)],
    )
    assert declare_config(lenient, Example) == Example()  # warned, default kept
    lenient.destroy_node()
