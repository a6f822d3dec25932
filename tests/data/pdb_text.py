"""Tiny PDB inputs written by tests at run time (fixed columns, as the format requires)."""
from __future__ import annotations


def atom_line(serial: int, name: str, resname: str, chain: str, resseq: int, xyz, element: str = "", *,
              record: str = "ATOM", altloc: str = " ", icode: str = " ", occupancy: float = 1.0) -> str:
    """One ATOM/HETATM record; ``element=''`` leaves the element column blank.

    Names of one-letter elements start in column 14 (``' CA '``), of two-letter elements in
    column 13 (``'FE  '``); a four-character ``name`` is written as given.
    """
    field = f" {name}" if len(name) < 4 and len(element) < 2 else name
    x, y, z = xyz
    line = (f"{record:<6}{serial:>5} {field:<4}{altloc}{resname:>3} {chain}{resseq:>4}{icode}   "
            f"{x:8.3f}{y:8.3f}{z:8.3f}{occupancy:6.2f}{0.0:6.2f}          {element:>2}")
    return line.rstrip() if not element else line


def residue_lines(start: int, resname: str, chain: str, resseq: int, atoms, **kwargs) -> list[str]:
    """Records of one residue from ``[(name, element, (x, y, z)), ...]``."""
    return [atom_line(start + i, name, resname, chain, resseq, xyz, element, **kwargs)
            for i, (name, element, xyz) in enumerate(atoms)]
