"""Worked example of CONTRIBUTING.md, "Adding a fabric": a fabric registered by one line, then used by a
machine file that names its kind.

Run it from the repository root: ``python docs/examples/toy_ring_fabric.py`` (tests/test_contributing_examples.py
does, and checks that CONTRIBUTING.md shows this file's marked part as it is here).
"""

from dataclasses import replace

import numpy as np

from tilesim.machine.description import Fabric, load_machine
from tilesim.machine.fabric import OnChipFabric, make_fabric, register_fabric


# --- example start ---
@register_fabric("toy-ring")
class ToyRingFabric(OnChipFabric):
    """cycles = fixed + ceil(max port bytes / port bpc) + (tiles / 4) · hop_cycles"""

    def __init__(self, machine):
        self.fixed = float(machine.chip.exchange_fixed_cycles)
        self.bpc = float(machine.chip.exchange_bytes_per_cycle)
        self.hop, self.mean_hops = float(machine.fabric.hop_cycles), machine.tiles_per_chip / 4

    def exchange_cycles(self, bytes_in, bytes_out, rows_transfers=None):  # [E, chips, tiles] -> [E, chips]
        peak_in, peak_out = bytes_in.max(axis=2), bytes_out.max(axis=2)
        peak = np.maximum(peak_in, peak_out).astype(np.float64)
        crit = np.where(peak_in >= peak_out, bytes_in.argmax(axis=2), bytes_out.argmax(axis=2))
        return np.where(peak > 0, self.fixed + np.ceil(peak / self.bpc) + self.mean_hops * self.hop, 0.0), crit


mesh = load_machine("mesh-demo")
ring = replace(mesh, fabric=Fabric(kind="toy-ring", cols=16, rows=16, hop_cycles=3, link_bytes_per_cycle=8))
# --- example end ---

if __name__ == "__main__":
    fabric = make_fabric(ring)
    one = np.zeros((1, 1, ring.tiles_per_chip))
    one[0, 0, :8] = 512.0  # 512 B in and out on tiles 0-7
    cycles, crit = fabric.exchange_cycles(one, one)
    print(f"{type(fabric).__name__}: {cycles[0, 0]:.1f} cycles, critical tile {int(crit[0, 0])}")
