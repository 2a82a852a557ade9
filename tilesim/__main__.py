"""``python -m tilesim`` and the ``tilesim`` command (``[project.scripts]``): :func:`run`."""

import sys


def run() -> int:
    """The command line: :func:`tilesim.cli.main`, imported here so that a Ctrl-C while the CLI's
    modules load is the same one line and exit status 130 as a Ctrl-C while a command runs."""
    try:
        from tilesim.cli import main
    except KeyboardInterrupt:
        print("tilesim: interrupted", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    sys.exit(run())
