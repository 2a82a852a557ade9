"""Every Python block of README.md runs as written (issue 39): in a scratch folder that holds what the
blocks read (``docs/`` of this repository; ``out/demo``, ``out/rr`` and ``out/b24`` as small runs made
the README's way), one block after another in one namespace each."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_blocks() -> list[str]:
    """The code of every python block of README.md, in order."""
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A folder with ``docs`` and three small runs where the README's blocks look for them."""
    from tilesim.cli import main

    home = tmp_path_factory.mktemp("readme")
    (home / "docs").symlink_to(ROOT / "docs")
    small = ["--layers", "64-32-4", "--caps", "8-4", "--input-cap", "8", "--timesteps", "10", "--steps", "2", "--quiet"]
    out = home / "out"
    assert main(["run", *small, "--batch", "8", "--out", str(out / "demo")]) == 0
    assert main(["run", *small, "--batch", "8", "--mapping", "round_robin", "--out", str(out / "rr")]) == 0
    assert main(["run", "--from", str(out / "demo"), "--batch", "4", "--quiet", "--out", str(out / "b24")]) == 0
    return home


def test_the_readme_has_its_python_blocks():
    assert len(readme_blocks()) >= 5


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(readme_blocks())))
def test_a_readme_block_runs_as_written(index, scratch, monkeypatch, capsys):
    monkeypatch.chdir(scratch)
    code = readme_blocks()[index]
    exec(compile(code, f"README.md python block {index + 1}", "exec"), {"__name__": "__readme__"})
