"""Behavior grounding: MimicGen with moving objects (registered as behavior ``mimicgen``).

- :mod:`.annotation`: object-centric subtask annotation + the manual-override sidecar;
- :mod:`.geometry`: moving object frames, segment transform, retiming (plain NumPy);
- :mod:`.source`: source demonstrations and nearest-neighbour selection;
- :mod:`.source_check`: the source demos' palm against the tracked object at grasp (a biased
  tracker, named before generation spends its attempts);
- :mod:`.generator`: :class:`MimicGenGenerator` and the registry factory :func:`make_generator`;
- :mod:`.demos`: demonstrations recorded without ROS (tests and benchmarks).
"""

from r2s2r_datagen.mimicgen.annotation import (
    AnnotationError,
    SubtaskAnnotation,
    annotate,
    load_sidecar,
    save_sidecar,
    sidecar_path,
)
from r2s2r_datagen.mimicgen.config import MimicGenConfig, load_mimicgen_config
from r2s2r_datagen.mimicgen.generator import (
    MimicGenGenerator,
    generator_from_dataset,
    make_generator,
)
from r2s2r_datagen.mimicgen.source import SourceDemo, SourceLibrary
from r2s2r_datagen.mimicgen.source_check import (
    SourceCheck,
    check_configured_sources,
    check_source_demos,
)

__all__ = [
    "AnnotationError",
    "MimicGenConfig",
    "MimicGenGenerator",
    "SourceCheck",
    "SourceDemo",
    "SourceLibrary",
    "SubtaskAnnotation",
    "annotate",
    "check_configured_sources",
    "check_source_demos",
    "generator_from_dataset",
    "load_mimicgen_config",
    "load_sidecar",
    "make_generator",
    "save_sidecar",
    "sidecar_path",
]
