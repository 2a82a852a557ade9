"""Issue 42 part 3: `tilesim calibrate` says what the 12 measured steps identify and what they do not."""

import math

import pytest


@pytest.mark.slow
def test_identifiability_of_the_shipped_fit_flags_compute_set_cycles_at_its_lower_bound():
    from tilesim.machine.costs import CostModel
    from tilesim.models.snn.calibration.calibrate import (
        FIT_PARAMS,
        _bases,
        format_identifiability,
        identifiability,
        read_cases,
    )
    from tilesim.models.snn.step.timing import default_costs

    cases = read_cases()
    prov = default_costs().provenance
    theta = tuple(prov["fit"][k] for k in FIT_PARAMS)
    loo = [tuple(e[k] for k in FIT_PARAMS) for e in prov["loo"]]
    bases = _bases(cases, CostModel("base", "0", prov["base_coefficients"]))
    ident = identifiability(cases, bases, theta, loo)
    by = {p.name: p for p in ident}
    assert [p.name for p in ident] == list(FIT_PARAMS)
    assert [p.name for p in ident if p.at_bound] == ["compute_set_cycles"]
    assert by["compute_set_cycles"].at_bound == "lower"
    # leave one architecture out: the 9 L2 cases and the 3 L5 cases are the two groups
    assert sorted(by["work_scale"].by_architecture) == ["L2 (2312-1466-1466-10)", "L5 (2312-588-586-586-586-586-10)"]
    for p in ident:
        assert p.loo_range[0] <= p.value <= p.loo_range[1] or p.at_bound
        lo, hi = p.architecture_range
        assert lo == min(p.by_architecture.values()) and hi == max(p.by_architecture.values())
        for other, r in p.correlation.items():
            assert math.isnan(r) or -1.0 - 1e-9 <= r <= 1.0 + 1e-9
            back = by[other].correlation[p.name]
            assert (math.isnan(r) and math.isnan(back)) or r == pytest.approx(back)
    text = format_identifiability(ident)
    assert "compute_set_cycles" in text and "AT ITS LOWER BOUND: not identified by these cases" in text
    assert "leave one architecture out" in text and "correlation" in text
    json_form = by["host_copy_ns_per_byte"].to_dict()
    assert json_form["at_bound"] == "" and len(json_form["bounds"]) == 2
