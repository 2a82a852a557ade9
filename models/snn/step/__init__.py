"""The SNN training step as a timed program: rows, memory, counters, assumptions, re-timing."""
