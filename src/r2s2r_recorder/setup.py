"""Build script for r2s2r_recorder (ament_python)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE_NAME = "r2s2r_recorder"

setup(
    name=PACKAGE_NAME,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE_NAME]),
        ("share/" + PACKAGE_NAME, ["package.xml"]),
        ("share/" + PACKAGE_NAME + "/msg", glob("r2s2r_recorder/msg/*.msg")),
    ],
    package_data={PACKAGE_NAME: ["msg/*.msg"]},
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="r2s2r maintainers",
    maintainer_email="maintainers@r2s2r.dev",
    description="Demonstration recording to rosbag2 (MCAP) and bag-to-dataset conversion.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "recorder = r2s2r_recorder.nodes.recorder_node:main",
            "r2s2r_recorder = r2s2r_recorder.cli:cli",
        ]
    },
)
