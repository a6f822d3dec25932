"""``python -m geomol``: the ``geomol`` command (:func:`geomol.cli.main`)."""
import sys

from geomol.cli import main

sys.exit(main())
