"""Issue 39: the installed distribution exposes the ``tilesim`` package only.

The repo keeps its top-level ``models/`` and ``mapping/`` folders; pyproject's
``[tool.setuptools.package-dir]`` installs them as ``tilesim.models`` and ``tilesim.mapping``, so no
``models`` or ``mapping`` lands at site-packages' top level (where it would shadow, or be shadowed by,
another distribution's). The wheel is built from a copy of the tracked sources and read back.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
# repo folder -> the package it is installed as
PACKAGE_OF_FOLDER = {"tilesim": "tilesim", "models": "tilesim.models", "mapping": "tilesim.mapping"}
# what the wheel is built from besides the package folders (pyproject's readme and license-files)
BUILD_FILES = ("pyproject.toml", "README.md", "LICENSE")


def _setuptools_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _source_files() -> list[str]:
    """The tracked files of the package folders (repo-relative, posix), else every file but caches."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--", *PACKAGE_OF_FOLDER],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        names = [n for n in out.split("\0") if n and (ROOT / n).is_file()]
    except (OSError, subprocess.SubprocessError):
        names = []
    if not names:  # not a git checkout
        names = [
            p.relative_to(ROOT).as_posix() for d in PACKAGE_OF_FOLDER for p in (ROOT / d).rglob("*") if p.is_file()
        ]
    return sorted(n for n in names if "__pycache__" not in n.split("/") and not n.endswith(".pyc"))


def _installed_path(repo_path: str) -> str:
    """Where a repo file lands in the wheel: ``models/snn/costs.toml`` -> ``tilesim/models/snn/costs.toml``."""
    folder, _, rest = repo_path.partition("/")
    return "/".join([*PACKAGE_OF_FOLDER[folder].split("."), rest])


def test_every_package_folder_is_listed_in_pyproject():
    """pyproject lists the packages by hand (package-dir rules out `find`): a folder with an __init__.py
    that is not listed would import in an editable install and be missing from the wheel."""
    cfg = _setuptools_config()
    assert cfg["package-dir"] == {pkg: folder for folder, pkg in PACKAGE_OF_FOLDER.items() if pkg != folder}
    on_disk = {
        ".".join([PACKAGE_OF_FOLDER[init.relative_to(ROOT).parts[0]], *init.relative_to(ROOT).parts[1:-1]])
        for folder in PACKAGE_OF_FOLDER
        for init in (ROOT / folder).rglob("__init__.py")
    }
    assert set(cfg["packages"]) == on_disk, (
        f"add to [tool.setuptools] packages: {sorted(on_disk - set(cfg['packages']))}; "
        f"remove: {sorted(set(cfg['packages']) - on_disk)}"
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built (no build isolation, no network) from a copy of the tracked sources."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for name in [*BUILD_FILES, *_source_files()]:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-v",  # setuptools' warnings are printed only with -v (test_the_build_prints_no_warning)
            "-w",
            str(tmp / "dist"),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (tmp / "build.log").write_text(out.stdout + out.stderr)
    (whl,) = (tmp / "dist").glob("tilesim-*.whl")
    return whl


@pytest.mark.slow
def test_the_build_prints_no_warning(wheel):
    """Issue 54: no setuptools warning while building (the deprecated ``license = {text = ...}`` table, data
    folders that "would be ignored" as packages). Not counted: pip's lines about this machine's package indexes
    and distutils' "byte-compiling is disabled" (printed where PYTHONDONTWRITEBYTECODE is set)."""
    log = (wheel.parents[1] / "build.log").read_text().splitlines()
    benign = ("Location 'file:", "byte-compiling is disabled")
    warnings = [line for line in log if "warn" in line.lower() and not any(b in line for b in benign)]
    assert not warnings, "\n".join(warnings)


@pytest.mark.slow
def test_the_wheel_declares_its_license(wheel):
    """The SPDX expression of pyproject's ``license`` and the LICENSE file travel in the wheel's metadata."""
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        text = z.read(metadata).decode()
        (licence,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert z.read(licence) == (ROOT / "LICENSE").read_bytes()
    assert "License-Expression: Apache-2.0" in text.splitlines()
    assert "Apache License" in (ROOT / "LICENSE").read_text()


@pytest.mark.slow
def test_wheel_installs_the_tilesim_package_only(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if not n.endswith("/")]
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        assert z.read(top_level).decode().split() == ["tilesim"]
    dist_info = top_level.split("/")[0]
    assert {n.split("/")[0] for n in names} == {"tilesim", dist_info}


@pytest.mark.slow
def test_wheel_holds_every_source_and_data_file(wheel):
    """Every tracked file of tilesim/, models/ and mapping/ (modules, presets, cost tables, calibration
    data, measured cases) is in the wheel at its package's path, and nothing else is."""
    with zipfile.ZipFile(wheel) as z:
        inside = {n for n in z.namelist() if n.startswith("tilesim/") and not n.endswith("/")}
    expected = {_installed_path(n) for n in _source_files()}
    assert not expected - inside, f"missing from the wheel: {sorted(expected - inside)}"
    assert not inside - expected, f"in the wheel but not tracked: {sorted(inside - expected)}"
    for pattern in (
        "tilesim/presets/*.toml",
        "tilesim/presets/costs/*.toml",
        "tilesim/models/snn/costs.toml",
        "tilesim/models/snn/calibration/*.csv",
        "tilesim/models/stencil/cases/*.csv",
        "tilesim/models/collective/costs.toml",
        "tilesim/models/tensix/costs.toml",
        "tilesim/models/noc/costs.toml",
        "tilesim/models/noc/cases/*.csv",
    ):
        assert any(Path(n).match(pattern) for n in inside), pattern


_FROM_THE_WHEEL = """
import sys
from pathlib import Path

root = Path(sys.argv[1]).resolve()
import tilesim, tilesim.models, tilesim.mapping
for m in (tilesim, tilesim.models, tilesim.mapping):
    assert Path(m.__file__).resolve().is_relative_to(root), m.__file__
from tilesim.models.collective.costs import load_costs
from tilesim.models.collective.measured import shipped_collective_cases
from tilesim.models.linear.measured import shipped_sparse_cases
from tilesim.models.snn.calibration.calibrate import shipped_cases_path
from tilesim.models.snn.step.timing import default_costs, uncalibrated_costs
from tilesim.models.stencil.measured import shipped_stencil_cases
from tilesim.models.tensix.matmul import load_matmul_costs
from tilesim.models.tensix.measured import shipped_matmul_cases
from tilesim.models.noc.costs import load_costs as load_noc_costs
from tilesim.models.noc.measured import shipped_noc_cases

load_costs(), load_matmul_costs(), default_costs(), uncalibrated_costs(), load_noc_costs()
assert shipped_cases_path().is_file()
SHIPPED = (shipped_collective_cases, shipped_sparse_cases, shipped_stencil_cases, shipped_matmul_cases)
for cases in (*SHIPPED, shipped_noc_cases):
    assert cases(), cases.__name__
print("ok")
"""


@pytest.mark.slow
def test_the_unpacked_wheel_reads_its_own_data(wheel, tmp_path):
    """Imported from the unpacked wheel (not the repo), the workloads find their cost tables and cases."""
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    out = subprocess.run(
        [sys.executable, "-c", _FROM_THE_WHEEL, str(tmp_path / "site")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr
