"""Build script for r2s2r_translation (ament_python)."""

from setuptools import find_packages, setup

PACKAGE_NAME = "r2s2r_translation"

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
        "Sim-to-real visual translation: colour transfer, a structure-to-real translator "
        "trained on real frames, translated datasets, KID and temporal consistency."
    ),
    license="Apache-2.0",
)
