"""What every stack built on the shared table program (:mod:`tilesim.models.snn.step.timing`) has in common:
its program, SRAM and superstep bound come from the table with the stack's :class:`TableTraits`.

A stack that builds its own program (its own rows, costs and memory) does not use this class."""

from __future__ import annotations

from dataclasses import dataclass, field

from tilesim.models.snn.stacks.base import Described
from tilesim.models.snn.step.memory import snn_memory
from tilesim.models.snn.step.table import KIND_HOST, step_shape
from tilesim.models.snn.step.timing import build_step_program
from tilesim.models.snn.step.traits import TableTraits, check_layer_chips

__all__ = ["TableStack"]


@dataclass(frozen=True)
class TableStack(Described):
    """A stack whose program is the table program with :attr:`traits` (subclasses set ``name``, the
    assumptions and the explanations)."""

    traits: TableTraits
    machine: object = field(compare=False, repr=False, default=None)

    host_structure = False

    @property
    def layers_span_chips(self) -> bool:
        return self.traits.layers_span_chips

    def rows(self) -> tuple:
        return self.traits.rows

    def host_labels(self) -> tuple:
        """The labels of the rows the tiles run for the host."""
        return tuple(r.label for r in self.traits.rows if r.kind == KIND_HOST)

    def program(self, step, machine):
        return build_step_program(
            step.config,
            step.placement,
            step.counters,
            machine,
            step.costs,
            steps_per_execution=step.steps_per_execution,
            cache=step.cache,
            form=step.form,
            structure=step.structure,
            stack=self.traits,
        )

    def memory(self, config, placement, machine, totals=None, cache=None):
        return snn_memory(config, placement, machine, totals, cache, stack=self.traits)

    def host(self, step, result):
        return result.book_as(self.host_labels(), "host")

    def default_placement(self, machine) -> str:
        return "spread"

    def explain(self, label: str, uniform: bool) -> str | None:
        return None

    def check_placement(self, placement) -> None:
        check_layer_chips(placement, self.traits)

    def max_supersteps(self, T: int, L: int, chips: int) -> int:
        serial = self.traits.serial_reduce and chips > 1
        reduce_chips = tuple(range(min(chips, L))) if serial else ()
        return step_shape(T, L, False, reduce_chips, self.traits.rows).supersteps
