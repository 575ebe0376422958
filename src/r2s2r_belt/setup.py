"""Build script for r2s2r_belt (ament_python)."""

from setuptools import find_packages, setup

PACKAGE_NAME = "r2s2r_belt"

setup(
    name=PACKAGE_NAME,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE_NAME]),
        ("share/" + PACKAGE_NAME, ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="r2s2r maintainers",
    maintainer_email="maintainers@r2s2r.dev",
    description=(
        "Belt-speed estimation (encoder + vision, filtered) and object tracking on the belt."
    ),
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "belt_speed = r2s2r_belt.nodes.belt_speed:main",
            "object_tracker = r2s2r_belt.nodes.object_tracker:main",
        ]
    },
)
