"""Worked example of CONTRIBUTING.md, "Adding a workload": a toy workload the core times without knowing it.

Run it from the repository root: ``python docs/examples/halo_ring.py`` (tests/test_contributing_examples.py
does, and checks that CONTRIBUTING.md shows this file's marked part as it is here).
"""

from dataclasses import dataclass

import numpy as np

from tilesim.machine.description import load_machine
from tilesim.machine.memory import MemoryLedger
from tilesim.program import ProgramBuilder
from tilesim.workload import Section, time_workload


# --- example start ---
@dataclass(frozen=True)
class HaloRing:  # every used tile computes, then swaps a halo with its ring neighbours
    tiles: int
    cycles: float
    halo_bytes: float
    iterations: int
    cells: int
    name: str = "halo-ring"

    def program(self, machine):  # the step as tile rows (tilesim.program)
        b = ProgramBuilder.for_machine(machine, "halo ring")
        used = np.zeros(machine.total_tiles)
        used[: self.tiles] = 1.0
        traffic = 2 * self.halo_bytes * used
        b.superstep("iterate", self.cycles * used, bytes_in=traffic, bytes_out=traffic, repeat=self.iterations)
        return b.build()

    def memory(self, machine):  # its SRAM ledger, in the vendor profiler's categories
        led = MemoryLedger(machine, remedy="use more tiles")
        led.add("variables:state", np.full(self.tiles, 4 * self.cells), np.arange(self.tiles), label="cells")
        return led

    def book(self, result):  # book fitted or host rows, if the workload has any
        return result

    def section(self, result):  # its own part of the report: the core names no workload concept
        return Section("halo ring", (f"{self.iterations} iterations",), (("iterations", self.iterations),))


timed = time_workload(HaloRing(8, 1000.0, 256.0, 3, 1024), load_machine("mesh-demo"))
# 3 x (1000 compute + 40 sync + 20 fixed + 1024 B / 8 B per cycle on the busiest link + 7 hops x 3) cycles at 1 GHz
# --- example end ---

if __name__ == "__main__":
    print(f"step {timed.step_s:.9e} s")
    print({k: f"{v:.9e}" for k, v in timed.result.breakdown_s().items()})
