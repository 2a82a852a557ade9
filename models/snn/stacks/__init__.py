"""Execution stacks: how each machine's own software runs the SNN training step
(:class:`~tilesim.models.snn.stacks.base.Stack`, one file each).

>>> stack = stack_for(machine)               # the machine vendor's (or stack_for(machine, "csl"))
>>> SnnStep(config, placement, counters, stack=stack)
"""

from __future__ import annotations

from tilesim.models.snn.stacks.base import STACK_CHOICES, STACKS, VENDOR_STACKS, Stack, check_choice, vendor_stack_name
from tilesim.models.snn.stacks.csl import CslStack
from tilesim.models.snn.stacks.poplar import PoplarStack
from tilesim.models.snn.stacks.tt_metal import TtMetalStack

__all__ = [
    "Stack",
    "STACKS",
    "STACK_CHOICES",
    "VENDOR_STACKS",
    "STACK_CLASSES",
    "stack_for",
    "stack_name",
    "stack_class",
    "describe_stack",
]

STACK_CLASSES = {cls.name: cls for cls in (PoplarStack, TtMetalStack, CslStack)}
"""Every stack by name (:data:`STACKS`)."""


def stack_name(machine, choice: str = "auto") -> str:
    """The stack ``choice`` names on ``machine`` (``auto``: its vendor's,
    :func:`tilesim.models.snn.stacks.base.vendor_stack_name`); ConfigError for an unknown name."""
    check_choice(choice)
    return vendor_stack_name(machine) if choice == "auto" else choice


def stack_class(name: str) -> type:
    """The class of stack ``name`` (ConfigError for an unknown one)."""
    check_choice(name)
    return STACK_CLASSES[name]


def stack_for(machine, choice: str | Stack = "auto") -> Stack:
    """The :class:`Stack` ``choice`` (a name of :data:`STACK_CHOICES`, or a stack, returned as it is) on
    ``machine``."""
    if not isinstance(choice, str):
        return choice
    return STACK_CLASSES[stack_name(machine, choice)].from_machine(machine)


def describe_stack(name: str) -> str:
    """One line: the stack ``name`` and its named assumptions (``auto``: the machine vendor's)."""
    if name == "auto":
        return "auto (the machine vendor's)"
    return stack_class(name).describe()
