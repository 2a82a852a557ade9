"""A workload's Chart (tilesim/outputs/chart.py): data in the record, checked when read back."""

import pytest

from tilesim.errors import ConfigError
from tilesim.outputs.chart import Chart, Panel, Series


def _chart(**over):
    d = Chart("mine.png", "t", "step", (0.0, 1.0), (Panel("y", (Series("a", (1.0, 2.0)),)),)).to_dict()
    d.update(over)
    return d


def test_round_trip():
    assert Chart.from_dict(_chart()).to_dict() == _chart()


@pytest.mark.parametrize(
    "over, field",
    [
        ({"file": "../escape.png"}, "file"),
        ({"file": "x.svg"}, "file"),
        ({"x": [0.0, "nan"]}, "x"),
        ({"x": [0.0]}, "series"),
        ({"panels": "oops"}, "malformed"),
        ({"panels": [{"y_label": "y", "series": [{"name": "a", "values": [1, 2], "style": "wavy"}]}]}, "style"),
    ],
)
def test_a_hand_edited_chart_is_refused_in_one_line(over, field):
    with pytest.raises(ConfigError, match=field):
        Chart.from_dict(_chart(**over))


def test_the_page_draws_a_chart_once_per_name_and_escaped():
    """report.html draws a workload's chart too: one legend entry and colour per series name across the panels,
    and a stored name is text, never markup."""
    from tilesim.outputs.page import _chart

    a = Series("<b>L1</b>", (1.0, 2.0))
    chart = Chart("mine.png", "t", "step", (0.0, 1.0), (Panel("y", (a,)), Panel("z", (a, Series("x", (0.0, 1.0))))))
    fig = _chart(chart)
    shown = [t.name for t in fig.data if t.showlegend]
    assert shown == ["&lt;b&gt;L1&lt;/b&gt;", "x"]
    assert fig.data[0].line.color == fig.data[1].line.color != fig.data[2].line.color
