"""The test suite on every Python this project supports (``nox``; ``make test-pythons`` calls it).

``nox -s tests`` runs every interpreter found on the machine; ``nox -s tests-3.10`` one of them.
Each session installs the package with its ``dev`` extra into its own virtual environment.
"""

import nox

PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
nox.options.error_on_missing_interpreters = False


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    session.install("-e", ".[dev]")
    session.run("python", "-m", "pytest", "-q", *session.posargs)
