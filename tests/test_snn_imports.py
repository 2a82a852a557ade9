"""Import rules of models/snn (architecture.md): numba only in kernel modules; no simpy anywhere
in the workload, matplotlib only in modules named *plot* (e.g. scaling_plot.py)."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "models" / "snn"


def imported_modules(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module.split(".")[0]


def test_import_rules():
    files = sorted(ROOT.rglob("*.py"))
    assert files
    for f in files:
        mods = set(imported_modules(f))
        assert "simpy" not in mods, f
        if "matplotlib" in mods:
            assert "plot" in f.stem, f  # as tests/test_imports.py: only in modules named *plot*
        if "numba" in mods:
            assert f.name == "jit.py" or f.name.startswith("kernels") or f.parent.name == "kernels", f
