"""Rich consoles for what geomol prints: text from users and files is shown as it is, never read as markup.

Rich reads ``[...]`` as markup and ``:name:`` as an emoji code: a SMILES such as ``c1cc[nH]c1`` printed
through a default console loses its ``[nH]`` (and copying it gives another molecule), a name such as
``[Cu] complex`` loses its metal. Every console geomol prints with comes from :func:`console`: markup and
emoji codes off, so every string (table cells and titles included) is shown as given, and colour is given
with ``style=``. Progress-bar columns showing such strings come from :func:`text_column`.
"""
from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import TextColumn

__all__ = ["console", "text_column"]


def console(stderr: bool = False, **options: Any) -> Console:
    """A console (stdout, or stderr) that prints strings as they are: no markup, no emoji codes."""
    return Console(stderr=stderr, markup=False, emoji=False, **options)


def text_column(template: str, **options: Any) -> TextColumn:
    """A progress-bar column whose ``template`` fields (``{task.description}``, ...) are shown as they are."""
    return TextColumn(template, markup=False, **options)
