"""Build script for r2s2r_view (ament_python)."""

from setuptools import find_packages, setup

PACKAGE_NAME = "r2s2r_view"

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
        "A live view of the cell in the browser (Rerun web viewer): robot, TF, cameras, "
        "tracked objects, belt speed, the policy's chunks and real-likeness; bag replay."
    ),
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "viewer = r2s2r_view.nodes.viewer:main",
        ]
    },
)
