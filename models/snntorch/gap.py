"""The held-out snnTorch call under every setting of its named assumptions, against the public logs (``use =
check``: nothing is fitted to them; this only shows how far each sourced mechanism goes).

``python -m tilesim.models.snntorch.gap`` prints one line per setting: the predicted call, its error against
the fastest and the slowest measured call, and the per-call host overhead the measured calls would need
beyond it (what the mechanisms leave unexplained).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from tilesim.machine.description import load_machine
from tilesim.models.snntorch.call import POPTORCH_CALL_BAND_S
from tilesim.models.snntorch.measured import read_snntorch_cases, shipped_snntorch_cases
from tilesim.models.snntorch.mechanisms import COPY_PROGRAMS, OUTLINES, Mechanisms
from tilesim.models.snntorch.step import snntorch_step
from tilesim.workload import time_workload

__all__ = ["GapRow", "gap_rows", "format_gap"]


@dataclass(frozen=True)
class GapRow:
    """One setting: the mechanisms, the per-call overhead, the predicted call and the measured range."""

    mechanisms: Mechanisms
    call_s: float
    predicted_s: float
    measured_s: tuple[float, float]

    @property
    def left_s(self) -> tuple[float, float]:
        """Seconds of the measured calls (fastest, slowest) the prediction leaves unexplained."""
        return (self.measured_s[0] - self.predicted_s, self.measured_s[1] - self.predicted_s)


def _settings():
    for outline, copies in itertools.product(OUTLINES, (*COPY_PROGRAMS, "aliased")):
        if outline == "none" and copies != "separate":
            continue  # nothing outlined: nothing copied, one setting
        if copies == "aliased":
            yield Mechanisms(outline=outline, alias_zero_copy=True)
        else:
            yield Mechanisms(outline=outline, copy_programs=copies)


def gap_rows(path=None, overheads=(POPTORCH_CALL_BAND_S[0], 3.0e-4, POPTORCH_CALL_BAND_S[1])) -> list[GapRow]:
    """Every setting of the mechanisms at every per-call overhead of ``overheads``, for the call of the shipped
    held-out file (or ``path``); all its rows must be one call on one machine."""
    cases = read_snntorch_cases(path or shipped_snntorch_cases()[0])
    calls = {(c.spec, c.machine) for c in cases if c.spec is not None}
    (base, machine_name), *rest = calls
    assert not rest, "one call per file"
    measured = sorted(c.spec.batch / c.measured for c in cases if c.spec is not None)
    machine = load_machine(machine_name)
    out = []
    for mech in _settings():
        call = replace(base, mechanisms=mech)
        s = time_workload(snntorch_step(call, machine), machine, keep_timeline=False).step_s
        for o in overheads:
            out.append(GapRow(mech, o, s - call.call_s + o, (measured[0], measured[-1])))
    return out


def format_gap(rows: list[GapRow]) -> str:
    """The rows as a table (ms)."""
    lines = [
        "outline  copies     overhead  predicted  measured   left unexplained (measured - predicted)",
    ]
    for r in rows:
        m = r.mechanisms
        copies = "aliased" if m.alias_zero_copy else ("-" if not m.copies else m.copy_programs)
        lines.append(
            f"{m.outline:8s} {copies:10s} {r.call_s * 1e3:5.2f} ms  {r.predicted_s * 1e3:6.3f} ms  "
            f"{r.measured_s[0] * 1e3:.2f}-{r.measured_s[1] * 1e3:.2f}  "
            f"{r.left_s[0] * 1e3:+.3f} to {r.left_s[1] * 1e3:+.3f} ms"
        )
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - a report
    print(format_gap(gap_rows()))
