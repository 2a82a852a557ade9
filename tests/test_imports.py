"""The architecture's import rules, read from the source (architecture.md)."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] if a.name.split(".")[0] != "models" else a.name for a in node.names}
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {node.module, node.module.split(".")[0]}
    return out


def files(pkg):
    return sorted((ROOT / pkg).rglob("*.py"))


def test_tilesim_never_imports_models_or_mapping():
    for f in files("tilesim"):
        bad = {m for m in imports(f) if m.split(".")[0] in ("models", "mapping")}
        assert not bad, f"{f} imports {bad}"


def test_simpy_only_in_engine():
    for pkg in ("tilesim", "models", "mapping"):
        for f in files(pkg):
            if "simpy" in imports(f):
                assert f.name == "engine.py" and f.parent.name == "tilesim", f


def test_numba_only_in_kernel_modules():
    for pkg in ("tilesim", "models", "mapping"):
        for f in files(pkg):
            if "numba" in imports(f):
                assert "kernel" in f.stem or f.stem.endswith("jit"), f


def test_matplotlib_only_in_plots_and_experiments():
    for pkg in ("tilesim", "models", "mapping"):
        for f in files(pkg):
            if "matplotlib" in imports(f):
                assert f.stem == "plots" or "plot" in f.stem, f


def test_mapping_never_imports_model_kernels():
    for f in files("mapping"):
        bad = {m for m in imports(f) if m.startswith("models") and "kernel" in m}
        assert not bad, f"{f} imports {bad}"
