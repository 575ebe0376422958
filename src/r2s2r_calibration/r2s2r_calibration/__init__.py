"""World grounding: intrinsics + blur, hand-eye, scene registration, system identification, belt calibration."""
