"""Sim-to-real visual translation (the paper's third finding); no ROS.

``frames`` (camera frames of a dataset, held-out split), ``structure`` (what a frame shows, not
how the camera renders it), ``colour`` (fitted colour/tone transfer, the baseline),
``network`` + ``structure_translator`` (CRAFT-inspired structure-to-real translator trained on
real frames only), ``checkpoint`` (one translator file per dataset's cameras), ``dataset``
(a whole dataset translated, resumable, written whole or not at all), ``metrics`` (KID on
ImageNet features, temporal consistency), ``cli`` (``r2s2r translate``).
"""
