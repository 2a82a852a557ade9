"""Command-line interface (placeholder until the core lands)."""
import sys


def main(argv=None) -> int:
    print("tilesim: core not built yet", file=sys.stderr)
    return 2
