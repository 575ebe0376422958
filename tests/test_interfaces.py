"""Messages built in this workspace (tf2_msgs, r2s2r_interfaces) over real DDS."""

import time

import rclpy
from geometry_msgs.msg import TransformStamped
from r2s2r_testing.ros import ros_context_of
from rclpy.executors import SingleThreadedExecutor

from r2s2r_interfaces.msg import ObjectTrack, ObjectTrackArray
from tf2_msgs.msg import TFMessage

# The type hash of tf2_msgs/msg/TFMessage in every ROS 2 distribution since Iron: a workspace
# build with another hash would not talk to real tf2 nodes.
UPSTREAM_TFMESSAGE_HASH = "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087"


def exchange(msg_type: type, topic: str, message: object) -> tuple[object, str]:
    with ros_context_of() as context:
        node = rclpy.create_node("interfaces_test", context=context)
        received: list[object] = []
        publisher = node.create_publisher(msg_type, topic, 10)
        node.create_subscription(msg_type, topic, received.append, 10)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        deadline = time.monotonic() + 20.0
        while not received and time.monotonic() < deadline:
            publisher.publish(message)
            executor.spin_once(timeout_sec=0.1)
        type_hash = str(node.get_publishers_info_by_topic(topic)[0].topic_type_hash)
        node.destroy_node()
        assert received, f"nothing received on {topic}"
        return received[0], type_hash


def test_tfmessage_round_trip_with_upstream_type_hash() -> None:
    transform = TransformStamped()
    transform.header.frame_id = "world"
    transform.child_frame_id = "base_link"
    transform.transform.translation.x = 0.25
    transform.transform.rotation.w = 1.0
    received, type_hash = exchange(TFMessage, "/tf_test", TFMessage(transforms=[transform]))
    assert isinstance(received, TFMessage)
    assert received.transforms[0].child_frame_id == "base_link"
    assert received.transforms[0].transform.translation.x == 0.25
    assert type_hash == UPSTREAM_TFMESSAGE_HASH


def test_project_track_message_round_trip() -> None:
    track = ObjectTrack(id=7, object_type="cube")
    track.pose.position.x = 0.6
    track.twist.linear.x = 0.1
    message = ObjectTrackArray(tracks=[track])
    message.header.frame_id = "base_link"
    received, _ = exchange(ObjectTrackArray, "/objects/tracks_test", message)
    assert isinstance(received, ObjectTrackArray)
    assert received.header.frame_id == "base_link"
    assert received.tracks[0].id == 7 and received.tracks[0].object_type == "cube"
    assert received.tracks[0].twist.linear.x == 0.1
