"""tools/reorganise.py (issue 37's moves): its one-pass rewrite of references, on sample text. The script
itself skips this file, so the old names below stay old after it runs."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("reorganise", ROOT / "tools" / "reorganise.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TOOL = _tool()
RW = TOOL.Rewriter(list(TOOL.MOVES))


def test_every_move_is_a_module_to_a_package_and_no_target_repeats():
    targets = [new for _, new in TOOL.MOVES]
    assert len(set(targets)) == len(targets)
    assert all(old.endswith(".py") and new.endswith(".py") and "/" in new for old, new in TOOL.MOVES)
    assert "tests/test_reorganise.py" in TOOL.SKIP


def test_a_from_import_of_modules_is_split_by_new_parent_and_keeps_its_names():
    src = (
        "from models.snn import kernels as K\n"
        "from tilesim import page, report  # pages\n"
        "from tilesim import ConfigError, plots\n"
    )
    assert RW.text(src, "t") == (
        "from models.snn.kernels import lif as K\n"
        "from tilesim.outputs import page, report  # pages\n"
        "from tilesim import ConfigError\nfrom tilesim.outputs import plots\n"
    )
    assert RW.text("    from models.snn import data\n", "t") == "    from models.snn.training import data\n"
    assert RW.text("from models.snn import kernels\n", "t") == "from models.snn.kernels import lif as kernels\n"


def test_a_rewritten_import_is_not_read_again():
    assert RW.text("from tilesim import timeline as closed\n", "t") == "from tilesim.engine import timeline as closed\n"
    assert RW.text("from tilesim.engine import simulate\n", "t") == "from tilesim.engine.events import simulate\n"


def test_dotted_names_strings_and_paths_are_rewritten_and_look_alikes_are_not():
    src = 'snn = "models.snn.cli:register"\npatch("tilesim.sweep.run_point")\n'
    src += "`models/snn/timing.py`, tilesim/machine.py\n"
    assert RW.text(src, "t") == (
        'snn = "models.snn.commands.cli:register"\npatch("tilesim.running.sweep.run_point")\n'
        "`models/snn/step/timing.py`, tilesim/machine/description.py\n"
    )
    same = "tilesim.report_sections tilesim.program tilesim.programs x.tilesim.engine models/snn/timing.pyc\n"
    assert RW.text(same, "t") == same
