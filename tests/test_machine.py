import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilesim.errors import ConfigError
from tilesim.machine.description import load_machine, preset_names, preset_text


def test_presets_exist():
    assert {"gc2", "gc200", "bow", "gc200x2", "m2000", "pod16", "pod64", "mesh-demo"} <= set(preset_names())
    for n in preset_names():
        m = load_machine(n)
        assert m.derived()["tiles"] == m.chip.tiles


def test_every_preset_number_cites_evidence():
    for n in preset_names():
        for line in preset_text(n).splitlines():
            code = line.split("#")[0].strip()
            if "=" in code and not code.startswith(("name", "description", "kind", "topology")):
                assert "[" in line.split("#", 1)[1], f"{n}: {line!r} has no evidence tag"


def test_gc200_reproduces_table1_of_butterfly_paper():
    """Claim B4: 1472 cores, ~900 MB, 47.5 TB/s, 320 GB/s, 62.5 TFLOPS FP32, 1.33 GHz."""
    d = load_machine("gc200").derived()
    assert d["tiles"] == 1472
    assert d["total_sram_bytes"] == 940_572_672  # 897 MiB ~ "900 MB"
    assert d["clock_hz"] == 1.33e9
    assert d["peak_fp32_flops"] == pytest.approx(62.5e12, rel=0.01)
    assert d["memory_bytes_per_s"] == pytest.approx(47.5e12, rel=0.02)
    assert d["link_bytes_per_s"] == pytest.approx(320e9)
    assert d["peak_fp16_flops"] == pytest.approx(250e12, rel=0.01)


def test_global_sync_hops_rule():
    # ipu-hardware.md §1.3 table at 1.33 GHz
    assert [load_machine("gc200", chips=n).global_sync_cycles() for n in (2, 4, 16, 64)] == [40, 80, 200, 679]


def test_toml_roundtrip(tmp_path):
    m = load_machine("pod16")
    p = tmp_path / "mine.toml"
    p.write_text(m.to_toml())
    assert load_machine(p) == m
    p.write_text(preset_text("bow"))
    assert load_machine(p).clock_hz == 1.85e9


def edited(tmp_path, old, new, base="gc200"):
    text = preset_text(base)
    assert old in text
    p = tmp_path / "m.toml"
    p.write_text(text.replace(old, new, 1))
    return p


@pytest.mark.parametrize(
    "old,new,match",
    [
        ("tiles = 1472", "tiles = 0", r"chip.tiles = 0: must be > 0"),
        ("tiles = 1472", "tiles = -3", r"chip.tiles = -3: must be > 0"),
        ("tiles = 1472", 'tiles = "many"', r"chip.tiles = 'many': must be an integer"),
        ("clock_hz = 1.33e9", "clock_hz = 1.33e9\nturbo = true", r"chip.turbo = True: unknown key"),
        ("link_efficiency = 0.85", "link_efficiency = 1.5", r"link_efficiency = 1.5: must be in \(0, 1\]"),
        ('kind = "all-to-all"', 'kind = "hypercube"', r"fabric.kind = 'hypercube': must be one of"),
        ('topology = "ladder"', 'topology = "hypercube"', r"'hypercube': must be one of ladder, line, ring, mesh"),
        ("sram_bytes = 638976", "sram_bytes = [1]", r"chip.sram_bytes = \[1\]: must be an integer"),
        ("[system]", "[system\n", r"is not valid TOML"),
    ],
)
def test_bad_machine_files(tmp_path, old, new, match):
    with pytest.raises(ConfigError, match=match):
        load_machine(edited(tmp_path, old, new))


def test_missing_key_and_unknown_machine(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text(preset_text("gc200").replace("sync_cycles = 90", ""))
    with pytest.raises(ConfigError, match=r"chip.sync_cycles = None: missing"):
        load_machine(p)
    with pytest.raises(ConfigError, match="is neither a preset nor a file"):
        load_machine("gc9000")
    with pytest.raises(ConfigError, match="no such file"):
        load_machine(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match=r"chips = 0: must be an integer in 1..4096"):
        load_machine("gc200", chips=0)


def test_mesh_grid_must_cover_tiles(tmp_path):
    with pytest.raises(ConfigError, match=r"fabric.cols\*rows = 240: must equal chip.tiles = 256"):
        load_machine(edited(tmp_path, "cols = 16", "cols = 15", base="mesh-demo"))


def test_preset_evidence_ships_with_the_package_and_headers_name_their_machine():
    """Issue 20: evidence tags pointed to ../shared/, which a package user does not have, and the bow
    preset's header said GC200."""
    from importlib import resources

    from tilesim.machine.description import preset_names, preset_text

    evidence = resources.files("tilesim").joinpath("presets/EVIDENCE.md").read_text()
    assert "§1.3" in evidence and "[S]" in evidence
    for name in preset_names():
        text = preset_text(name)
        assert "../shared" not in text, name
    assert "Bow" in preset_text("bow").splitlines()[0]
    assert "POD64" in preset_text("pod64").splitlines()[0]


@settings(max_examples=150, deadline=None)
@given(
    section=st.sampled_from(["chip", "system", "fabric"]),
    data=st.data(),
    value=st.one_of(
        st.just(0),
        st.just(-1),
        st.just(0.0),
        st.just(float("nan")),
        st.just(float("inf")),
        st.just("x"),
        st.just(True),
        st.just(99999999999),
        st.just([1]),
        st.just(1e-300),
    ),
)
def test_every_bad_machine_field_names_a_fix(section, data, value):
    """Issue 19: 131 of 300 mutated machine files got a message with no fix."""
    from tilesim.io import loads_toml
    from tilesim.machine.description import machine_from_dict, preset_text

    doc = loads_toml(preset_text("gc200"))
    key = data.draw(st.sampled_from(sorted(doc[section])))
    doc[section][key] = value
    try:
        machine_from_dict(doc, "m.toml")
    except ConfigError as exc:
        msg = str(exc)
        assert "\n" not in msg and "; " in msg, msg
