"""RunOptions: one typed, validated set of run options for TOML, the command line and Python
(issue 14 part 1, issue 19 part 1). Every bad value is exit 2 and one line: field, value, limit, fix."""

import argparse
import dataclasses
import math
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

from tilesim.cli import main
from tilesim.errors import ConfigError
from tilesim.models.snn.commands.options import (
    RunOptions,
    add_option_flags,
    option_names,
    options_dict,
    options_from_args,
    options_from_mapping,
)

# (TOML line, what the message must contain) — the issue-19 findings for this layer
TOML_CASES = [
    ("batch = true", "batch = True: must be an integer"),
    ("batch = 4.5", "batch = 4.5: must be an integer"),
    ('batch = "abc"', "batch = 'abc': must be an integer"),
    ('input_cap = "4"', "input_cap = '4': must be an integer"),
    ('lr = "fast"', "lr = 'fast': must be a number"),
    ("layers = 20", "layers = 20: must be sizes joined by '-'"),
    ('layers = ["20", "x"]', "layers = ['20', 'x']: every size must be an integer"),
    ("caps = {a = 1}", "caps = {'a': 1}: must be sizes joined by '-'"),
    ('dataset = "imagenet"', "dataset = 'imagenet': must be one of synthetic, shd, nmnist, dvsgesture"),
    ("out = 7", "out = 7: must be a string"),
    ("seed = 1.5", "seed = 1.5: must be an integer"),
    ('recurrent = "no"', "recurrent = 'no': must be true or false"),
    ('json = "yes"', "json = 'yes': must be true or false"),
    ("batch = 0", "batch = 0: must be >= 1"),
    ("batchsize = 4", "batchsize = 4: unknown key; did you mean batch? allowed: machine, chips"),
]
FLAG_CASES = [
    (["--seed", "-1"], "--seed = -1: must be >= 0"),
    (["--weight-mul", "inf"], "--weight-mul = inf: must be finite"),
    (["--batch", "1000000000000"], "--batch = 1000000000000: one batch of input lists needs"),
    (["--caps", "8--2"], "--caps = '8--2': must be positive integers joined by '-'"),
    (["--caps=-8-2"], "--caps = '-8-2': must be positive integers joined by '-'"),
    (["--batch", "abc"], "--batch = 'abc': must be an integer"),
    (["--lr", "0"], "--lr = 0.0: must be > 0"),
    (["--layers", "64-40-4", "--caps", "8-8-2"], "--caps = '8-8-2': needs one cap per neuron layer (2"),
    (
        ["--layers", "100-40-4", "--dataset", "shd"],
        "--layers N0 = 100: must be 700 for dataset shd; e.g. --layers 700-40-4",
    ),
]


def one_line_with_fix(err: str, needle: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert needle in lines[0], err
    assert "Traceback" not in err
    # the house form: "<field> = <value>: <limit>; <fix>" with a non-empty fix
    assert re.search(r" = .+: .+; \S", lines[0]), f"no fix in: {lines[0]}"


@pytest.mark.parametrize("line,needle", TOML_CASES)
def test_bad_toml_value_is_exit_2_one_line_with_fix(tmp_path, capsys, line, needle):
    cfg = tmp_path / "run.toml"
    cfg.write_text('layers = "32-16-4"\n' + line + "\n" if not line.startswith("layers") else line + "\n")
    assert main(["run", str(cfg), "--quiet"]) == 2
    err = capsys.readouterr().err
    one_line_with_fix(err, f"{cfg}: {needle}")
    assert "write e.g." in err or "did you mean batch?" in err  # the fix, in TOML syntax


@pytest.mark.parametrize("args,needle", FLAG_CASES)
def test_bad_flag_is_exit_2_one_line_with_fix(capsys, args, needle):
    assert main(["run", "--quiet", *args]) == 2
    one_line_with_fix(capsys.readouterr().err, needle)


@pytest.mark.parametrize("line,needle", TOML_CASES)
def test_python_api_refuses_the_same_values(line, needle):
    data = tomllib.loads(line)
    with pytest.raises(ConfigError, match=re.escape(needle)):
        options_from_mapping(data)
    with pytest.raises(ConfigError, match=re.escape(needle)) as info:
        RunOptions(**data)  # the constructor itself: ConfigError, not pydantic's
    assert "; e.g. RunOptions(" in str(info.value) or "did you mean" in str(info.value)


def test_constructor_is_strict_and_frozen():
    with pytest.raises(ConfigError, match="steps = True: must be an integer"):
        RunOptions(steps=True)
    o = RunOptions(layers=(32, 16, 4), caps="8-2", batch=4)
    assert o.layers == (32, 16, 4) and o.caps == (8, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.batch = 8
    with pytest.raises(ConfigError, match="batch = 0: must be >= 1"):
        dataclasses.replace(o, batch=0)  # a changed copy is validated too
    assert RunOptions(layers="32-16-4") == RunOptions(layers=[32, 16, 4])


def test_flags_toml_keys_and_fields_are_one_list():
    p = argparse.ArgumentParser()
    add_option_flags(p)
    flags = {a.dest for a in p._actions if a.dest != "help"}
    assert flags == set(option_names())
    assert set(options_dict()) == set(option_names())
    help_text = p.format_help()
    assert "--max-activity" in help_text and "(default 0.05)" in help_text


def test_flags_win_over_the_toml_file(tmp_path):
    cfg = tmp_path / "r.toml"
    cfg.write_text('layers = "32-16-4"\nbatch = 8\nseed = 1\n')
    p = argparse.ArgumentParser()
    p.add_argument("config", nargs="?")
    add_option_flags(p)
    o = options_from_args(p.parse_args([str(cfg), "--seed", "3", "--recurrent"]))
    assert (o.layers, o.batch, o.seed, o.recurrent) == ((32, 16, 4), 8, 3, True)


def test_defaults_are_the_demo_configuration():
    o = RunOptions()
    assert (o.layers, o.batch, o.timesteps, o.max_activity, o.input_cap, o.machine) == (
        (700, 1462, 1460, 20),
        48,
        100,
        0.05,
        48,
        "gc200",
    )


# ---- any TOML table: valid options or a ConfigError, never another exception -------------------
_scalars = st.one_of(
    st.booleans(),
    st.integers(),
    st.integers(min_value=-10, max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["32-16-4", "8-2", "-8-2", "synthetic", "shd", "adam", "fixed", "gc200"]),
    st.datetimes(),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8,
)
_keys = st.one_of(
    st.sampled_from(option_names()), st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=10)
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=6))
@example({"data_root": "0"})  # refused for the default dataset: the message still names the file
def test_any_toml_table_gives_options_or_config_error(data):
    try:
        RunOptions(**data)  # the Python API: the same two outcomes
    except ConfigError as exc:
        assert "\n" not in str(exc)
    try:
        o = options_from_mapping(data, "fuzz.toml")
    except ConfigError as exc:
        msg = str(exc)
        assert "\n" not in msg and msg.startswith("fuzz.toml: "), msg
        return
    assert isinstance(o, RunOptions)
    assert all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in o.layers)
    assert isinstance(o.batch, int) and not isinstance(o.batch, bool) and o.batch >= 1
    assert math.isfinite(o.lr) and o.lr > 0
