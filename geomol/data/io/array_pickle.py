"""Read pickles that hold only NumPy arrays and plain containers (the official EGNO data files).

The official EGNO code ships its Mocap data (``motion_run.pkl``), splits (``split_run.pkl``,
``<molecule>_split.pkl``) as pickles of lists, tuples, dicts and NumPy arrays. ``pickle.load``
would run any callable a file names; :func:`load_array_pickle` resolves only the few globals
NumPy needs to rebuild arrays and scalars, so a crafted file cannot execute code.
"""
from __future__ import annotations

import io
import os
import pickle

from geomol.errors import DatasetError

__all__ = ["load_array_pickle"]

_ALLOWED = {
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("_codecs", "encode"),  # bytes written by protocol 2 pickles
}


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: only NumPy arrays and plain "
                                         "containers are read")
        return super().find_class(module, name)


def load_array_pickle(path: str | os.PathLike):
    """The object stored in ``path`` (lists, tuples, dicts, numbers, strings, NumPy arrays only).

    Raises:
        DatasetError: the file is missing, truncated, not a pickle, or names anything else.
    """
    try:
        with open(path, "rb") as handle:
            return _ArrayUnpickler(io.BytesIO(handle.read())).load()
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError, ImportError,
            IndexError) as exc:
        raise DatasetError(f"unreadable pickle ({exc})", source=path) from exc
