"""Subcommands of the ``geomol`` command line that are not Lightning runs (see :mod:`geomol.cli`)."""
