"""Import rules of models/snn (architecture.md): numba only in kernel modules; no simpy or
matplotlib anywhere in the workload."""
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
        assert not mods & {"simpy", "matplotlib"}, f
        if "numba" in mods:
            assert f.name == "jit.py" or f.name.startswith("kernels"), f
