"""Issue 41: Ctrl-C while the parser loads, labels drawn as written, ``map-search --out DIR`` replaced
as one, and the paths of a config file confined to its folder."""

import json
import shutil
from importlib import metadata
from pathlib import Path

import pytest

from tilesim.cli import main
from tilesim.errors import ConfigError

# ---- Ctrl-C at any moment ---------------------------------------------------------------------


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


class _SlowPlugin:
    """An entry point whose module is being imported when Ctrl-C comes."""

    name = "slow"

    def load(self):
        raise KeyboardInterrupt


@pytest.mark.parametrize(
    "where",
    [
        "tilesim.cli._hoist_log_flags",
        "tilesim.cli.set_log_level",
        "tilesim.cli.build_parser",
        "tilesim.cli._add_compare",
        "tilesim.cli._Parser.parse_args",
        "plugin",
    ],
)
def test_ctrl_c_while_the_parser_and_the_plugins_load_is_one_line_and_exit_130(monkeypatch, capsys, where):
    if where == "plugin":
        monkeypatch.setattr(metadata, "entry_points", lambda **k: [_SlowPlugin()])
    else:
        monkeypatch.setattr(where, _interrupt)
    assert main(["machines"]) == 130
    assert capsys.readouterr().err == "tilesim: interrupted\n"


def test_ctrl_c_while_the_cli_modules_import_is_the_same_line(monkeypatch, capsys):
    """The ``tilesim`` command (``tilesim.__main__:run``) imports the CLI inside its own handling: a Ctrl-C
    while ``tilesim.cli`` and what it imports load is the one line too (before, the console script imported
    ``tilesim.cli`` itself, outside any handler)."""
    import sys

    from tilesim.__main__ import run

    class Interrupting:
        def find_spec(self, name, path=None, target=None):
            if name == "tilesim.cli":
                raise KeyboardInterrupt

    monkeypatch.delitem(sys.modules, "tilesim.cli")
    monkeypatch.setattr(sys, "meta_path", [Interrupting(), *sys.meta_path])
    assert run() == 130
    assert capsys.readouterr().err == "tilesim: interrupted\n"


def test_ctrl_c_while_a_command_runs_is_the_same_line(monkeypatch, capsys):
    monkeypatch.setattr("tilesim.cli._cmd_machines", _interrupt)
    assert main(["machines"]) == 130
    assert capsys.readouterr().err == "tilesim: interrupted\n"


# ---- labels drawn as written ------------------------------------------------------------------

LABELS = ("$\\foo{$", "a $x^{$ and \\", "$$", "\\frac{1}{0}$")


def _program(path: Path) -> Path:
    steps = "".join(
        f"[[superstep]]\nlabel = '{lab}'\ncompute_cycles = {100 * (i + 1)}\nexchange_bytes = 64\n"
        for i, lab in enumerate(LABELS)
    )
    path.write_text(f"name = '$\\foo{{$ program'\n{steps}")
    return path


def test_labels_and_names_with_dollars_and_backslashes_are_drawn_as_written(tmp_path, capsys):
    """A superstep label, a program's name and a run folder's name reach the pictures (timeline,
    breakdown, compare.png); matplotlib would read ``$\\foo{$`` as mathtext and fail after the
    simulation. They are drawn as written: every command ends with exit 0 and its pictures."""
    prog = _program(tmp_path / "p.toml")
    runs = [tmp_path / "$\\foo{$ a", tmp_path / "$x$ b"]
    assert main(["simulate", str(prog), "--machine", "mesh-demo", "--out", str(runs[0])]) == 0, capsys.readouterr()
    for png in ("timeline.png", "breakdown.png", "work.png"):
        assert (runs[0] / png).stat().st_size > 1000, png
    summary = json.loads((runs[0] / "summary.json").read_text())
    assert {x["label"] for x in summary["by_label"]} == set(LABELS)
    shutil.copytree(runs[0], runs[1])
    assert main(["compare", *map(str, runs), "--out", str(tmp_path / "cmp")]) == 0, capsys.readouterr().err
    assert (tmp_path / "cmp" / "compare.png").stat().st_size > 1000


def test_a_workload_chart_with_dollars_is_drawn_as_written(tmp_path):
    from tilesim.outputs.chart import Chart, Panel, Series
    from tilesim.outputs.plots import draw_chart

    chart = Chart("c.png", "$\\foo{$", "$x", (0.0, 1.0), (Panel("$\\bar{", (Series("\\$y{", (1.0, 2.0)),)),))
    draw_chart(chart, tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_mathtext_stays_on_outside_tilesims_pictures():
    import matplotlib

    from tilesim.outputs.plots import literal_text

    literal_text(lambda: None)()
    assert matplotlib.rcParams["text.parse_math"] is True


# ---- map-search --out DIR replaced as one -----------------------------------------------------

SEARCH = ["map-search", "--batch", "2", "--timesteps", "6", "--max-activity", "0.25", "--max-evals", "4", "--quiet"]


def _one_network(folder: Path) -> list:
    """The network of a search folder, after checking that every part of it is of that network: the
    baseline and the best run, the best mapping beside them, and the comparison of those two runs."""
    base, best = (json.loads((folder / n / "summary.json").read_text()) for n in ("baseline", "best"))
    assert base["settings"]["layers"] == best["settings"]["layers"]
    found, used = (json.loads((folder / p).read_text()) for p in ("best-mapping.json", "best/mapping.json"))
    assert found == used
    cmp = json.loads((folder / "compare.json").read_text())
    assert {r["name"]: r["step_s"] for r in cmp["runs"]} == {"baseline": base["step_s"], "best": best["step_s"]}
    assert [r["folder"] for r in cmp["runs"]] == [str(folder.absolute() / n) for n in ("baseline", "best")]
    return best["settings"]["layers"]


@pytest.fixture
def no_pictures(monkeypatch):
    monkeypatch.setattr("tilesim.outputs.report._draw", lambda *a, **k: [])
    monkeypatch.setattr("tilesim.outputs.plots.comparison_figure", lambda c, path: Path(path))


def test_a_search_folder_is_the_old_search_or_the_new_one_whenever_the_rerun_stops(
    tmp_path, monkeypatch, capsys, no_pictures
):
    from tilesim.models.snn.commands import cli as snn_cli
    from tilesim.outputs import compare

    out = tmp_path / "search"
    assert main([*SEARCH, "--layers", "24-16-4", "--out", str(out)]) == 0, capsys.readouterr().err
    (out / "my-notes.txt").write_text("mine")
    old = _one_network(out)
    assert old == [24, 16, 4]
    write_run, write_cmp = snn_cli.write_run_outputs, compare.write_comparison
    calls = []

    def stop_at(n, real):
        def writer(*a, **k):
            calls.append(1)
            if len(calls) == n:
                raise KeyboardInterrupt
            return real(*a, **k)

        return writer

    for what, n in (("baseline", 1), ("best", 2), ("compare", 3)):
        calls.clear()
        monkeypatch.setattr(snn_cli, "write_run_outputs", stop_at(n, write_run))
        monkeypatch.setattr(compare, "write_comparison", stop_at(n, write_cmp))
        assert main([*SEARCH, "--layers", "20-12-4", "--out", str(out)]) == 130, what
        capsys.readouterr()
        assert _one_network(out) == old, what  # the old search whole: no new run beside an old one
        assert (out / "my-notes.txt").read_text() == "mine"
    monkeypatch.setattr(snn_cli, "write_run_outputs", write_run)
    monkeypatch.setattr(compare, "write_comparison", write_cmp)
    assert main([*SEARCH, "--layers", "20-12-4", "--out", str(out)]) == 0, capsys.readouterr().err
    assert _one_network(out) == [20, 12, 4] and (out / "my-notes.txt").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left


# ---- the paths of a config file ---------------------------------------------------------------


def _options(cfg: Path, *flags):
    import argparse

    from tilesim.models.snn.commands.options import add_option_flags, options_from_args

    p = argparse.ArgumentParser()
    p.add_argument("config", nargs="?")
    add_option_flags(p)
    return options_from_args(p.parse_args([str(cfg), *flags]))


@pytest.mark.parametrize(
    "key, value",
    [
        ("data_root", "../../x"),
        ("data_root", "~/data"),
        ("data", "/etc/passwd"),
        ("model", "../net.nir"),
        ("costs", "sub/../../costs.toml"),
        ("mapping", "../m.json"),
        ("machine", "../../machines/big.toml"),
    ],
)
def test_a_path_in_a_config_file_that_leaves_its_folder_is_refused(tmp_path, key, value):
    cfg = tmp_path / "shared" / "run.toml"
    cfg.parent.mkdir()
    network = 'layers = "700-32-20"\ndataset = "shd"' if key == "data_root" else 'layers = "32-16-4"'
    cfg.write_text(f'{network}\n{key} = "{value}"\n')
    with pytest.raises(ConfigError, match=rf"{key} \(in .*run.toml\) = .*leaves the config file's folder.*--"):
        _options(cfg)


def test_a_path_in_a_config_file_is_read_beside_it_wherever_tilesim_runs(tmp_path, monkeypatch):
    cfg = tmp_path / "shared" / "run.toml"
    (cfg.parent / "data").mkdir(parents=True)
    shutil.copy(Path(__file__).parents[1] / "models" / "snn" / "costs.toml", cfg.parent / "costs.toml")
    cfg.write_text('layers = "32-16-4"\ncosts = "costs.toml"\ndata = "data/x.npz"\nmachine = "gc200"\n')
    monkeypatch.chdir(tmp_path)  # not the config's folder
    o = _options(cfg)
    assert o.costs == str(cfg.parent / "costs.toml") and o.data == str(cfg.parent / "data" / "x.npz")
    assert o.machine == "gc200" and o.mapping == "auto"  # a preset and a strategy are no paths
    for strategy in ("auto", "spread", "contiguous"):
        cfg.write_text(f'layers = "32-16-4"\nmapping = "{strategy}"\n')
        assert _options(cfg).mapping == strategy
    assert _options(cfg, "--costs", "../elsewhere.toml").costs == "../elsewhere.toml"  # a flag is the user's own


def test_a_run_refuses_a_config_path_outside_before_it_simulates(tmp_path, capsys):
    cfg = tmp_path / "shared" / "run.toml"
    cfg.parent.mkdir()
    cfg.write_text('layers = "700-32-20"\ndataset = "shd"\ndata_root = "../../x"\n')
    assert main(["run", str(cfg), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "data_root (in " in err and "--data-root on the command line" in err


@pytest.mark.parametrize(
    "table", ['data_root = "../../x"', 'data_root = "/etc"', '[grid]\ncosts = ["c.toml", "~/c.toml"]']
)
def test_a_sweep_file_path_outside_its_folder_is_refused_before_any_point_runs(tmp_path, capsys, table):
    """A shared sweep file decides what runs, not which of your files it reads: a path that leaves
    its folder is refused, naming the key, before a database is made or a point runs."""
    sweep = tmp_path / "shared" / "sweep.toml"
    sweep.parent.mkdir()
    base = '[base]\nlayers = "32-16-4"\nsteps = 1\n'
    sweep.write_text(base + table + "\n" if table.startswith("[") else base + table + "\n")
    db = tmp_path / "r.sqlite"
    assert main(["sweep", str(sweep), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "leaves the config file's folder" in err and not db.exists()
