"""LoadGen comes with the main install where a wheel exists (pyproject.toml): the README's main
command runs inference through MLPerf's LoadGen, and the simulated server stays for the rest."""

from pathlib import Path

import tomllib
from packaging.markers import Marker
from packaging.requirements import Requirement

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"


def test_loadgen_is_a_default_dependency_where_its_wheels_are():
    deps = [Requirement(d) for d in
            tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]]
    (lg,) = [r for r in deps if r.name == "mlcommons-loadgen"]
    marker: Marker = lg.marker

    def on(system, machine, python="3.11"):
        return marker.evaluate({"sys_platform": system, "platform_machine": machine,
                                "python_version": python})

    assert on("linux", "x86_64") and on("linux", "x86_64", "3.12") and on("darwin", "arm64")
    assert on("win32", "AMD64")
    # no wheel: pip would have to build it from source, so the default install leaves it out
    assert not on("linux", "aarch64") and not on("linux", "x86_64", "3.14")
