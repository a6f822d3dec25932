"""The package's version and the folder it lives in, for modules that record or look beside them.

Modules inside the package import these from here rather than ``import geomol`` (which would load the
package's lazy API surface while the package itself is still being imported). ``pyproject.toml`` reads
the version from this file, so it is written in one place.
"""
from pathlib import Path

__version__ = "0.1.0"

PACKAGE_DIR = Path(__file__).resolve().parent
"""The ``geomol`` package folder (its parent is the checkout for an editable install)."""
