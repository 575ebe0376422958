"""Build script for r2s2r_sim (ament_python)."""

from setuptools import find_packages, setup

PACKAGE_NAME = "r2s2r_sim"

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
    description="MuJoCo backend, task, simulated cell, real twin and sim bridge.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "real_twin = r2s2r_sim.nodes.real_twin:main",
            "sim_bridge = r2s2r_sim.nodes.sim_bridge:main",
            "demonstrator = r2s2r_sim.demonstrator.node:main",
        ]
    },
)
