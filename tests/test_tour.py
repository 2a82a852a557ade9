"""The tour (docs/tour.md) builds in quick mode: seven sections, each with its pictures and command."""
import re

from experiments.tour import SECTIONS, main


def test_tour_quick_writes_every_section(tmp_path, capsys):
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    md = (tmp_path / "tour.md").read_text()
    heads = re.findall(r"^## \d\. (.+)$", md, flags=re.M)
    assert len(heads) == len(SECTIONS) == 7
    images = re.findall(r"!\[[^\]]*\]\((tour/[^)]+\.png)\)", md)
    assert len(images) >= 7
    for rel in images:
        assert (tmp_path / rel).stat().st_size > 5000, rel
    assert md.count("```sh") == 7
    for needle in ("SRAM", "superstep", "mesh-demo", "gradient-only", "T × B", "16 per tile", "chips"):
        assert needle in md, needle
    assert "nan" not in md.lower().replace("nanny", "")
