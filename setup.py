"""Build script for the r2s2r bring-up package (repository root, ament_python)."""

from pathlib import Path

from setuptools import setup

PACKAGE_NAME = "r2s2r"
ROOT = Path(__file__).parent


def tree(folder: str) -> list[tuple[str, list[str]]]:
    """Install every file under ``folder`` into share/r2s2r/<folder>, keeping subfolders."""
    entries: dict[str, list[str]] = {}
    for path in sorted((ROOT / folder).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            relative = path.relative_to(ROOT)
            target = str(Path("share") / PACKAGE_NAME / relative.parent)
            entries.setdefault(target, []).append(str(relative))
    return list(entries.items())


setup(
    name=PACKAGE_NAME,
    version="0.1.0",
    packages=["r2s2r", "r2s2r.cli", "r2s2r.experiment", "r2s2r.pipeline"],
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE_NAME]),
        ("share/" + PACKAGE_NAME, ["package.xml"]),
        *tree("launch"),
        *tree("config"),
    ],
    install_requires=["setuptools"],
    zip_safe=False,
    maintainer="r2s2r maintainers",
    maintainer_email="maintainers@r2s2r.dev",
    description="r2s2r bring-up: launch files, parameters, graph definitions and the CLI.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "r2s2r = r2s2r.cli:main",
            # The main job's node (config/graphs/sim_generate.yaml): prerequisites, generation.
            "sim_generate = r2s2r.pipeline.main_job:main",
        ]
    },
)
