"""NumPy ``.npz`` archives, checked to be one before NumPy reads them.

``np.load`` takes any file: given JSON or text named ``.npz`` it tries to unpickle it and answers with
advice about ``allow_pickle``, which says nothing about the mistake. :func:`open_npz` looks at the first
bytes, names what the file is instead, and loads real archives without pickles.
"""
from __future__ import annotations

import os

import numpy as np

from geomol.errors import DatasetError

__all__ = ["open_npz"]

_ZIP = (b"PK\x03\x04", b"PK\x05\x06")


def _what(head: bytes) -> str:
    if head.startswith(b"\x93NUMPY"):
        return "it is a single NumPy array (.npy); an .npz holds named arrays (np.savez)"
    if head.startswith(b"\x1f\x8b"):
        return "it is gzip-compressed data"
    text = head.lstrip()
    if text[:1] in (b"{", b"["):
        return "it is text that looks like JSON"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return "it is binary data of another kind"
    return "it is a text file"


def open_npz(path: str | os.PathLike):
    """``np.load(path)`` of an ``.npz`` archive (pickled arrays refused); use it as a context manager.

    Raises:
        DatasetError: the file cannot be read or is not an .npz archive (the message says what it is).
    """
    try:
        with open(path, "rb") as handle:
            head = handle.read(64)
    except OSError as exc:
        raise DatasetError(f"cannot read the file ({exc.strerror or exc})", source=path) from None
    if not head.startswith(_ZIP):
        raise DatasetError(f"not an .npz archive: {_what(head)}", source=path)
    return np.load(path, allow_pickle=False)
