"""Hand/head camera drivers: OpenCV/V4L2 device, file replay, simulator."""
