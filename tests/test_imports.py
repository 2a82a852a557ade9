"""The architecture's import rules, read from the source (architecture.md)."""

import ast
from pathlib import Path

import networkx as nx

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


# the one module of the discrete-event engine
SIMPY_HOME = "tilesim/engine/events.py"


def test_simpy_only_in_engine():
    for pkg in ("tilesim", "models", "mapping"):
        for f in files(pkg):
            if "simpy" in imports(f):
                assert f.relative_to(ROOT).as_posix() == SIMPY_HOME, f


def test_numba_only_in_kernel_modules():
    for pkg in ("tilesim", "models", "mapping"):
        for f in files(pkg):
            if "numba" in imports(f):
                assert "kernel" in f.stem or f.stem.endswith("jit") or f.parent.name == "kernels", f


def test_matplotlib_only_in_plots_and_experiments():
    for pkg in ("tilesim", "models", "mapping"):
        for f in files(pkg):
            if "matplotlib" in imports(f):
                assert f.stem == "plots" or "plot" in f.stem, f


def test_mapping_never_imports_model_kernels():
    for f in files("mapping"):
        bad = {m for m in imports(f) if m.startswith("models") and "kernel" in m}
        assert not bad, f"{f} imports {bad}"


# ---- the module graph: no cycles, and no library module imports a command line (issue 14) ----
PACKAGES = ("tilesim", "models", "mapping")


def module_files(root: Path = ROOT) -> dict:
    """``{dotted module name: path}`` of every module of the packages (a package is its __init__)."""
    out = {}
    for pkg in PACKAGES:
        for f in sorted((root / pkg).rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    return out


def import_graph(root: Path = ROOT) -> nx.DiGraph:
    """Edges module -> module it imports, anywhere in the file (function-local imports included:
    an import moved into a function to dodge a cycle is still a cycle). ``from pkg import name``
    points at ``pkg.name`` when that is a module, else at ``pkg``."""
    mods = module_files(root)
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in mods]
                targets = subs + ([node.module] if len(subs) < len(node.names) else [])
            g.add_edges_from((name, t) for t in targets if t in mods and t != name)
    return g


def is_cli(module: str) -> bool:
    last = module.rsplit(".", 1)[-1]
    return last == "cli" or last.endswith("_cli")


def test_no_import_cycles():
    cycles = list(nx.simple_cycles(import_graph()))
    assert not cycles, f"import cycles: {cycles[:5]}"


def test_no_library_module_imports_a_command_line():
    g = import_graph()
    bad = sorted((a, b) for a, b in g.edges if is_cli(b) and not is_cli(a) and a != "tilesim.__main__")
    assert not bad, f"library modules importing CLI modules: {bad}"
