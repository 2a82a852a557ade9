"""The architecture's import rules, read from the source (architecture.md).

The repo's folders are installed as packages (pyproject's ``[tool.setuptools.package-dir]``):
``tilesim/`` is ``tilesim``, ``models/`` is ``tilesim.models`` and ``mapping/`` is ``tilesim.mapping``.
The core is ``tilesim`` without those two.
"""

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
# folder -> the package it is installed as
PACKAGE_OF_FOLDER = {"tilesim": "tilesim", "models": "tilesim.models", "mapping": "tilesim.mapping"}
WORKLOAD_PACKAGES = ("tilesim.models", "tilesim.mapping")
# the folders' names as top-level packages: they are not installed (they would shadow, or be
# shadowed by, other distributions), and imported from the repo root they are second copies
OLD_NAMES = ("models", "mapping")


def in_package(module: str, pkg: str) -> bool:
    """Whether ``module`` is the package ``pkg`` or inside it."""
    return module == pkg or module.startswith(pkg + ".")


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from tilesim import models` imports tilesim.models
            out |= {node.module, node.module.split(".")[0]} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def files(pkg):
    return sorted((ROOT / pkg).rglob("*.py"))


def test_tilesim_never_imports_models_or_mapping():
    """The core (the tilesim/ folder) never imports tilesim.models or tilesim.mapping."""
    for f in files("tilesim"):
        bad = {m for m in imports(f) if any(in_package(m, w) for w in WORKLOAD_PACKAGES + OLD_NAMES)}
        assert not bad, f"{f} imports {bad}"


def test_nothing_imports_the_folders_by_their_old_top_level_names():
    """``models`` and ``mapping`` are not installed as top-level packages; `from tilesim.models.snn ...` would
    work only from the repo root, as a second copy of tilesim.models.snn."""
    bad = []
    for folder in ("tilesim", "models", "mapping", "experiments", "benchmarks", "tests", "docs"):
        for f in files(folder):
            if "fixtures" in f.relative_to(ROOT).parts:
                continue
            old = sorted(m for m in imports(f) if any(in_package(m, o) for o in OLD_NAMES))
            bad += [f"{f.relative_to(ROOT)}: {', '.join(old)}"] if old else []
    assert not bad, "import tilesim.models / tilesim.mapping instead:\n" + "\n".join(bad)


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
        bad = {m for m in imports(f) if in_package(m, "tilesim.models") and "kernel" in m}
        assert not bad, f"{f} imports {bad}"


# ---- the module graph: no cycles, and no library module imports a command line (issue 14) ----
def module_files(root: Path = ROOT) -> dict:
    """``{dotted module name as installed: path}`` of every module of the packages (a package is its
    __init__): ``models/snn/__init__.py`` is ``tilesim.models.snn``."""
    out = {}
    for folder, pkg in PACKAGE_OF_FOLDER.items():
        for f in sorted((root / folder).rglob("*.py")):
            parts = list(f.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([pkg, *parts])] = f
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
