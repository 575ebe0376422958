"""Build script for r2s2r_world (ament_python)."""

from setuptools import find_packages, setup

PACKAGE_NAME = "r2s2r_world"

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
        "The world contract: world parameters, the grounding artifact's reader and schema "
        "version, grounded worlds, arm kinematics of a cell, the cell state publisher."
    ),
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "cell_state_publisher = r2s2r_world.nodes.cell_state_publisher:main",
        ]
    },
)
