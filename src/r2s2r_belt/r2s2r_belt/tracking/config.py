"""Typed configuration of the object tracker (one schema for the core and the node).

The object catalogue (types, shapes, sizes, colours) is the NOMINAL catalogue of
``config/world/nominal.yaml``; as ROS parameters hold no nested maps it is given as parallel
flat lists (``catalogue.names``, ``catalogue.shapes``, ``catalogue.sizes_m`` with three values per
type, ``catalogue.rgb`` with three values per type).
"""

from __future__ import annotations

from pydantic import Field, model_validator
from r2s2r_common.config import ConfigModel
from r2s2r_description.cameras import HEAD
from r2s2r_description.frames import BASE_LINK

SHAPES = ("box", "cylinder", "sphere")
"""Shapes the pose estimator knows."""


class CatalogueConfig(ConfigModel):
    """The object types the tracker may report (nominal catalogue, parallel lists)."""

    names: list[str] = Field(
        default_factory=lambda: ["cube", "cylinder", "block", "sphere"],
        description="Object type names.",
    )
    shapes: list[str] = Field(
        default_factory=lambda: ["box", "cylinder", "box", "sphere"],
        description="Shape per type: box, cylinder or sphere.",
    )
    sizes_m: list[float] = Field(
        default_factory=lambda: [
            *(0.05, 0.05, 0.05),
            *(0.05, 0.05, 0.07),
            *(0.04, 0.07, 0.045),
            *(0.055, 0.055, 0.055),
        ],
        description="Size per type (x, y, z; cylinder: diameter, diameter, height; sphere: "
        "diameter three times), m; three values per type.",
    )
    rgb: list[float] = Field(
        default_factory=lambda: [
            *(0.85, 0.15, 0.12),
            *(0.15, 0.30, 0.85),
            *(0.95, 0.80, 0.10),
            *(0.15, 0.75, 0.25),
        ],
        description="Nominal surface colour per type (r, g, b in 0..1); three values per type.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> CatalogueConfig:
        count = len(self.names)
        if count == 0:
            raise ValueError("catalogue.names: needs at least one object type")
        if len(set(self.names)) != count:
            raise ValueError(f"catalogue.names = {self.names}: names repeat")
        if len(self.shapes) != count:
            raise ValueError(
                f"catalogue.shapes has {len(self.shapes)} entries: expected one per name ({count})"
            )
        for shape in self.shapes:
            if shape not in SHAPES:
                raise ValueError(f"catalogue.shapes entry {shape!r}: expected one of {SHAPES}")
        for key, values in (("sizes_m", self.sizes_m), ("rgb", self.rgb)):
            if len(values) != 3 * count:
                raise ValueError(
                    f"catalogue.{key} has {len(values)} values: expected 3 per name ({3 * count})"
                )
        if any(v <= 0.0 or v > 1.0 for v in self.sizes_m):
            raise ValueError(f"catalogue.sizes_m = {self.sizes_m}: expected values in (0, 1] m")
        if any(v < 0.0 or v > 1.0 for v in self.rgb):
            raise ValueError(f"catalogue.rgb = {self.rgb}: expected values in [0, 1]")
        return self


class DetectionConfig(ConfigModel):
    """Segmentation of the belt region and per-object measurement."""

    belt_length_m: float = Field(
        default=1.6, gt=0.0, le=20.0, description="Belt length along belt_link x, m."
    )
    belt_width_m: float = Field(
        default=0.30, gt=0.0, le=5.0, description="Belt width along belt_link y, m."
    )
    belt_margin_m: float = Field(
        default=0.02,
        ge=0.0,
        le=0.5,
        description="Belt-plane fit uses points this far inside the belt edges, m.",
    )
    plane_band_m: float = Field(
        default=0.03,
        gt=0.0,
        le=0.2,
        description="Points within this distance of the nominal belt plane seed the plane fit, m.",
    )
    plane_inlier_m: float = Field(
        default=0.004, gt=0.0, le=0.05, description="Plane-fit inlier distance after seeding, m."
    )
    min_height_m: float = Field(
        default=0.012,
        gt=0.0,
        le=0.2,
        description="Points higher than this above the fitted belt plane are object candidates, m.",
    )
    max_height_m: float = Field(
        default=0.25, gt=0.0, le=2.0, description="Candidates above this height are ignored, m."
    )
    min_pixels: int = Field(
        default=4, ge=1, le=100000, description="Smaller connected components are ignored, px."
    )
    min_saturation: int = Field(
        default=60,
        ge=0,
        le=255,
        description="Pixels less saturated than this (OpenCV HSV, 0..255) carry no hue.",
    )
    hue_sigma_deg: float = Field(
        default=12.0,
        gt=0.0,
        le=180.0,
        description="Spread of an object's observed hue around its catalogue hue, deg.",
    )
    height_sigma_m: float = Field(
        default=0.006,
        gt=0.0,
        le=0.2,
        description="Spread of an object's measured top height around its catalogue height, m.",
    )
    max_type_cost: float = Field(
        default=25.0,
        gt=0.0,
        le=1e6,
        description="Components whose best type cost (squared normalised hue + height "
        "residuals) exceeds this are rejected as not a catalogue object.",
    )
    top_band_m: float = Field(
        default=0.008,
        gt=0.0,
        le=0.1,
        description="Points within this of the top height belong to the top face, m.",
    )
    anchor_to_belt_plane: bool = Field(
        default=True,
        description="Rotate measurements about the camera centre so the fitted belt plane lies "
        "on belt_link's plane from /tf_static (removes camera tilt and height errors).",
    )
    on_belt_tolerance_m: float = Field(
        default=0.012,
        gt=0.0,
        le=0.2,
        description="Top height within this of the catalogue height: object rests on the belt "
        "(centre height from the fitted plane), m.",
    )


class TrackingConfig(ConfigModel):
    """Track management: prediction with the belt velocity, gating, association."""

    gate_m: float = Field(
        default=0.06,
        gt=0.0,
        le=1.0,
        description="A detection farther than this from a track's prediction cannot update it, m.",
    )
    type_mismatch_cost_m: float = Field(
        default=0.03,
        ge=0.0,
        le=1.0,
        description="Association cost added when detection and track types differ, m.",
    )
    min_hits: int = Field(
        default=2, ge=1, le=100, description="Detections before a track is published."
    )
    max_coast_s: float = Field(
        default=1.0,
        gt=0.0,
        le=60.0,
        description="A track not detected for this long is deleted, s.",
    )
    position_noise_m: float = Field(
        default=0.003, gt=0.0, le=1.0, description="Standard deviation of a detection, m."
    )
    acceleration_noise_mps2: float = Field(
        default=0.5,
        gt=0.0,
        le=100.0,
        description="Process noise of the constant-velocity model, m/s^2.",
    )
    belt_velocity_noise_mps: float = Field(
        default=0.01,
        gt=0.0,
        le=10.0,
        description="How closely an object resting on the belt follows the belt speed, m/s.",
    )
    region_margin_m: float = Field(
        default=0.1,
        ge=0.0,
        le=5.0,
        description="Tracks predicted beyond the belt ends by more than this are deleted, m.",
    )


class ObjectTrackerConfig(ConfigModel):
    """Parameters of the ``object_tracker`` node."""

    base_frame: str = Field(default=BASE_LINK, description="Frame of the published tracks.")
    camera_frame: str = Field(
        default=HEAD.optical_frame,
        description="Optical frame of the head camera (used if the image has no frame_id).",
    )
    belt_frame: str = Field(default="belt_link", description="Belt frame (x = travel) in TF.")
    sync_tolerance_s: float = Field(
        default=0.02,
        gt=0.0,
        le=1.0,
        description="RGB and depth images whose stamps differ by at most this form a pair, s.",
    )
    belt_speed_timeout_s: float = Field(
        default=1.0,
        gt=0.0,
        le=60.0,
        description="Older /belt/speed readings are not used for prediction, s.",
    )
    diagnostics_period_s: float = Field(
        default=1.0, gt=0.0, le=60.0, description="Period of /diagnostics messages, s."
    )
    catalogue: CatalogueConfig = Field(default_factory=CatalogueConfig)
    detection: DetectionConfig = Field(default_factory=DetectionConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
