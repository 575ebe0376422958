"""Belt-speed estimation (encoder + vision, filtered) and object tracking on the belt."""
