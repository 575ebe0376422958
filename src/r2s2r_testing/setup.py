"""Build script for r2s2r_testing (ament_python): the workspace's test infrastructure."""

from setuptools import find_packages, setup

PACKAGE_NAME = "r2s2r_testing"

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
        "Test infrastructure of the workspace: the pytest plugin, synthetic episodes and bags, "
        "the scripted test generator, stand-in programs for tests."
    ),
    license="Apache-2.0",
)
