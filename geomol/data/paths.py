"""Where the shared real data lives: one environment variable, ``GEOMOL_SHARED_DATA``.

Library classes take their data folders as arguments. Only where a default is convenient (the
Mocap file, scripts, benchmarks and tests) is the shared-data folder looked up, always here:

1. ``$GEOMOL_SHARED_DATA`` when set;
2. else ``shared/data`` beside the checkout that holds the ``geomol`` package (an editable install
   in ``<work>/<checkout>`` finds ``<work>/shared/data``) — never a path relative to the working directory.
"""
from __future__ import annotations

import os
from pathlib import Path

from geomol.errors import ConfigError
from geomol.version import PACKAGE_DIR

__all__ = ["SHARED_DATA_ENV", "shared_data_dir", "shared_data"]

SHARED_DATA_ENV = "GEOMOL_SHARED_DATA"


def shared_data_dir() -> Path:
    """The shared real-data folder (see the module notes); it may not exist."""
    root = os.environ.get(SHARED_DATA_ENV)
    if root:
        return Path(root)
    return PACKAGE_DIR.parent.parent / "shared" / "data"


def shared_data(*parts: str) -> Path:
    """A path under the shared data folder, which must exist.

    Raises:
        ConfigError: not found, naming the path and the environment variable.
    """
    path = shared_data_dir().joinpath(*parts)
    if not path.exists():
        raise ConfigError(f"shared data not found (give the path explicitly or set ${SHARED_DATA_ENV})", source=path)
    return path
