"""Build script for r2s2r_dataset (ament_python)."""

from setuptools import find_packages, setup

PACKAGE_NAME = "r2s2r_dataset"

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
        "Episode datasets without ROS: schema, HDF5 shards, manifest and partial files, "
        "action labels, the LeRobot v3.0 export."
    ),
    license="Apache-2.0",
    entry_points={"console_scripts": []},
)
