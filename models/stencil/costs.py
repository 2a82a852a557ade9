"""Cycle and byte costs of the 3×3 Gaussian-blur stencil on an IPU tile.

Codelets (``main/codelets/GaussianBlurCodelets*.cpp`` in thorbenlouw/lbm-graphcore @97cd841): one
vertex per worker slice; the loop body per vector of channels loads nine neighbours, does 8 adds
and 3 multiplies (``(nw+ne+sw+se)/16 + m/4 + (n+s+e+w)/8``) and stores one result: **21 issue
slots per vector, counted from the source**. A pixel (4 channels) is 4 scalar vectors for
``float``, 2 ``float2`` vectors, 1 ``half4`` vector. A worker issues one instruction per worker
cycle; six workers share the tile, so a compute set takes 6 × the slowest worker's cycles::

    worker_cycles = vertex_fixed + pixels × vectors_per_pixel × (21 + loop_overhead)

What the C++ source cannot tell (the compiler's loop and address overhead per vector, the fixed
cost of a vertex) is **fitted** per codelet on the profiled compute cycles of one image
(cheese 2200×1122 at 1 and 16 IPUs, ``louw_gc2_stencil_phase_cycles.csv``); every other image,
IPU count and partition is a prediction.

On-tile copies around the halo exchange (the profile's ``pre`` and ``post``): Poplar gathers each
vertex's ``in`` slice and on-tile halos into contiguous vertex fields before the exchange and
scatters ``out`` back after it. Six workers copying with 64-bit load/store move 8 B per tile cycle
[D]; each contiguous region (a row of a slice, a run of an on-tile halo) and the copy program itself
cost fixed cycles, **fitted** on the same profile (pre/post at 1 and 16 IPUs, all three types)::

    pre  = pre_fixed + pre_per_region × (slice rows + on-tile halo runs) + (slice + halo bytes) / 8
    post = post_fixed + post_per_row × slice rows + slice bytes / 8

On-chip halo exchange and IPU-Link transfers use the machine's documented constants
(``exchange_bytes_per_cycle``, ``exchange_fixed_cycles``, link bandwidth/latency): nothing here.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilesim.errors import ConfigError, config_message

__all__ = ["Codelet", "CODELETS", "CopyCosts", "COPY", "DTYPES", "SLOTS_PER_VECTOR", "codelet"]

SLOTS_PER_VECTOR = 21  # 9 loads + 8 adds + 3 multiplies + 1 store, counted from the loop body
CHANNELS = 4  # RGBA


@dataclass(frozen=True)
class Codelet:
    """One codelet family (data type): its layout and its cycle constants."""

    dtype: str
    bytes_per_channel: int
    vectors_per_pixel: int
    loop_overhead_cycles: float  # [F] per vector, beyond the 21 counted slots
    vertex_fixed_cycles: float  # [F] per vertex (worker slice)

    @property
    def bytes_per_pixel(self) -> int:
        return CHANNELS * self.bytes_per_channel

    @property
    def cycles_per_pixel(self) -> float:
        return self.vectors_per_pixel * (SLOTS_PER_VECTOR + self.loop_overhead_cycles)

    def worker_cycles(self, pixels):
        """Cycles of one worker vertex over ``pixels`` pixels (scalar or array; 0 pixels -> 0)."""
        return (pixels > 0) * (self.vertex_fixed_cycles + pixels * self.cycles_per_pixel)


# fitted on cheese 2200x1122 compute cycles at 1 and 16 IPUs (phase file); see the module docstring
CODELETS = {
    "float": Codelet("float", 4, 4, loop_overhead_cycles=2.35, vertex_fixed_cycles=107.0),
    "float2": Codelet("float2", 4, 2, loop_overhead_cycles=0.88, vertex_fixed_cycles=342.0),
    "half4": Codelet("half4", 2, 1, loop_overhead_cycles=7.00, vertex_fixed_cycles=116.0),
}
DTYPES = tuple(CODELETS)


@dataclass(frozen=True)
class CopyCosts:
    """On-tile copy programs around the halo exchange (profile phases ``pre`` and ``post``)."""

    bytes_per_cycle: float = 8.0  # [D] six workers, one 64-bit load/store each per worker cycle
    pre_fixed_cycles: float = 1315.0  # [F]
    pre_per_region_cycles: float = 2.46  # [F]
    post_fixed_cycles: float = 591.0  # [F]
    post_per_row_cycles: float = 7.68  # [F]


COPY = CopyCosts()


def codelet(dtype: str) -> Codelet:
    """The codelet of ``dtype`` (float, float2, half4); :class:`ConfigError` otherwise."""
    if dtype not in CODELETS:
        raise ConfigError(
            config_message(
                "--dtype",
                dtype,
                f"must be one of {', '.join(DTYPES)}",
                "half4 = fp16 4-wide, float2 = fp32 2-wide, float = scalar fp32",
            )
        )
    return CODELETS[dtype]
