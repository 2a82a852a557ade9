"""CONTRIBUTING.md's worked examples are files that run (docs/examples/*.py), and the code the guide
shows is each file's marked part, character for character (no pasted copy that drifts)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "CONTRIBUTING.md"
EXAMPLES = sorted((ROOT / "docs" / "examples").glob("*.py"))
START, END = "# --- example start ---\n", "# --- example end ---\n"
# what each example prints: the times counted by hand in the guide
EXPECTED = {
    "halo_ring.py": "step 3.627000000e-06 s",  # 3 x (1000 + 40 + 20 + 1024 / 8 + 7 x 3) cycles at 1 GHz
    "toy_ring_fabric.py": "ToyRingFabric: 276.0 cycles, critical tile 0",  # 20 + 512 / 8 + (256 / 4) x 3
}


def marked_part(path: Path) -> str:
    """The text of ``path`` between its example markers."""
    text = path.read_text()
    assert text.count(START) == text.count(END) == 1, f"{path.name}: one pair of example markers"
    return text.split(START, 1)[1].split(END, 1)[0]


def guide_blocks() -> list[tuple[str | None, str]]:
    """``(example path or None, code)`` of every python block of the guide, in order."""
    pattern = r"(?:<!-- example: (?P<path>\S+) -->\n)?```python\n(?P<code>.*?)```"
    return [(m["path"], m["code"]) for m in re.finditer(pattern, GUIDE.read_text(), re.S)]


def test_every_example_has_an_expected_output():
    assert {p.name for p in EXAMPLES} == set(EXPECTED)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_an_example_runs_and_prints_the_times_counted_by_hand(path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert EXPECTED[path.name] in done.stdout


def test_the_guide_shows_each_example_as_it_is_and_pastes_no_other_code():
    blocks = guide_blocks()
    assert [p for p, _ in blocks if p is None] == [], "a python block of CONTRIBUTING.md that is not an example file"
    assert sorted(p for p, _ in blocks) == sorted(str(p.relative_to(ROOT)) for p in EXAMPLES)
    for path, code in blocks:
        assert code == marked_part(ROOT / path), f"CONTRIBUTING.md's copy of {path} differs from the file"
