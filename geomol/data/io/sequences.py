"""Protein chain sequences read straight from receptor files (PDB, gzip PDB, TRIPOS MOL2).

Sequences are what protein clustering needs (:mod:`geomol.data.splits.protein_clusters`): one letter per
residue that has a CA atom (PDB) or per ``RESIDUE`` substructure (MOL2), in file order, per chain.
These are line readers, not structure readers: they take a second for a thousand receptors
where building full structures would take minutes, and they never build blocks. Force-field
residue names (HID/HIE/HIP, CYX, ASH, ...) map to their amino acid; anything else unknown is ``X``.

A blank chain id is written ``'_'``, as in the corpus manifests.
"""
from __future__ import annotations

from os import PathLike

import numpy as np
from Bio.Data.PDBData import protein_letters_3to1_extended

from geomol.data.io._source import read_text
from geomol.errors import StructureReadError

__all__ = ["one_letter", "pdb_chain_sequences", "mol2_chain_sequences", "chain_sequences", "pdb_heavy_atoms",
           "contact_chain"]

# Protonation / disulfide / terminal variants written by force-field preparation tools.
_FORCE_FIELD_NAMES = {"HID": "H", "HIE": "H", "HIP": "H", "HSD": "H", "HSE": "H", "HSP": "H", "HIS": "H",
                      "CYX": "C", "CYM": "C", "ASH": "D", "GLH": "E", "LYN": "K", "ARN": "R", "TYM": "Y"}
_CAPS = {"ACE", "NME", "NMA", "NH2", "HOH", "WAT"}


def one_letter(resname: str) -> str | None:
    """Amino-acid letter of a residue name (``'HIE'`` → ``'H'``, ``'MSE'`` → ``'M'``), ``None`` for caps/water,
    ``'X'`` for anything else."""
    name = resname.strip().upper()
    if name in _CAPS:
        return None
    # AMBER terminal forms ('NALA', 'CGLY') carry the residue in the last three letters.
    if len(name) == 4 and name[0] in "NC" and name[1:] in protein_letters_3to1_extended:
        name = name[1:]
    return _FORCE_FIELD_NAMES.get(name) or protein_letters_3to1_extended.get(name, "X")


def _chain_id(text: str) -> str:
    return text.strip() or "_"


def pdb_chain_sequences(path: str | PathLike) -> dict[str, str]:
    """``{chain: sequence}`` of the first model's residues with a CA atom (ATOM or HETATM records)."""
    sequences: dict[str, list[str]] = {}
    seen: set[tuple[str, str]] = set()
    for line in read_text(path).splitlines():
        if line.startswith("ENDMDL"):
            break
        if not line.startswith(("ATOM  ", "HETATM")) or line[12:16].strip() != "CA" or line[76:78].strip() == "CA":
            continue  # the last test rejects calcium ions written as atom 'CA' with element Ca
        chain, residue = _chain_id(line[21]), line[22:27]
        if (chain, residue) in seen:  # an alternate location of the same CA
            continue
        seen.add((chain, residue))
        letter = one_letter(line[17:20])
        if letter is not None:
            sequences.setdefault(chain, []).append(letter)
    if not sequences:
        raise StructureReadError("no protein residues (no CA atoms)", path)
    return {chain: "".join(letters) for chain, letters in sequences.items()}


def _mol2_section(text: str, name: str) -> list[str]:
    """Lines of the first ``@<TRIPOS>name`` section."""
    start = text.find(f"@<TRIPOS>{name}")
    if start < 0:
        return []
    body = text[start:].splitlines()[1:]
    end = next((i for i, line in enumerate(body) if line.startswith("@<TRIPOS>")), len(body))
    return [line for line in body[:end] if line.strip()]


def _mol2_chain_of_substructure(text: str) -> dict[str, str]:
    """``{substructure id: chain}`` from the SUBSTRUCTURE section (fields: id, name, root atom, type,
    dictionary type, chain, ...)."""
    chains = {}
    for line in _mol2_section(text, "SUBSTRUCTURE"):
        fields = line.split()
        if len(fields) > 5:
            chains[fields[0]] = fields[5]
    return chains


def mol2_chain_sequences(path: str | PathLike) -> dict[str, str]:
    """``{chain: sequence}`` of a MOL2 protein: one residue per ``CA`` atom of the ATOM section, in file order.

    The residue name is the part of the substructure name before ``-`` (``'PRO-A2'`` → ``PRO``); the
    chain is the substructure's chain field, else the letter after ``-`` in its name. Atoms are
    read rather than SUBSTRUCTURE entries because some writers give residues with insertion
    codes (thrombin's 1A ... 1H) one shared substructure.

    Raises:
        StructureReadError: no amino-acid residue (e.g. a small molecule).
    """
    text = read_text(path)
    chain_of = _mol2_chain_of_substructure(text)
    sequences: dict[str, list[str]] = {}
    for line in _mol2_section(text, "ATOM"):
        fields = line.split()
        if len(fields) < 8 or fields[1] != "CA" or not fields[5].startswith("C."):
            continue  # 'CA' typed as an element (calcium) is not an alpha carbon
        resname, _, position = fields[7].partition("-")
        chain = chain_of.get(fields[6]) or (position[:1] if position[:1].isalpha() else "_")
        letter = one_letter(resname)
        if letter is not None:
            sequences.setdefault(_chain_id(chain), []).append(letter)
    if not any(set(seq) - {"X"} for seq in sequences.values()):
        raise StructureReadError("no amino-acid residues (no alpha carbons) in the ATOM section", path)
    return {chain: "".join(letters) for chain, letters in sequences.items()}


def chain_sequences(path: str | PathLike) -> dict[str, str]:
    """Chain sequences of a PDB or MOL2 receptor (chosen by the name, ``.gz`` allowed)."""
    name = str(path).lower().removesuffix(".gz")
    return mol2_chain_sequences(path) if name.endswith(".mol2") else pdb_chain_sequences(path)


def pdb_heavy_atoms(path: str | PathLike) -> tuple[np.ndarray, list[str]]:
    """Coordinates [N, 3] (Å) and chain ids of a PDB's first-model protein heavy atoms (ATOM records)."""
    coords, chains = [], []
    for line in read_text(path).splitlines():
        if line.startswith("ENDMDL"):
            break
        element = line[76:78].strip() or line[12:16].strip()[:1]
        if line.startswith("ATOM  ") and element.upper() not in ("H", "D"):
            coords.append((float(line[30:38]), float(line[38:46]), float(line[46:54])))
            chains.append(_chain_id(line[21]))
    if not coords:
        raise StructureReadError("no protein ATOM records", path)
    return np.asarray(coords), chains


def contact_chain(receptor: str | PathLike, ligand_xyz: np.ndarray, cutoff: float = 5.0) -> str:
    """The receptor chain with most heavy atoms within ``cutoff`` Å of any ligand atom (``ligand_xyz`` [M, 3]).

    The same rule as the corpus manifests' ``ligand_contact_chain``; ties go to the first chain in the file.
    """
    coords, chains = pdb_heavy_atoms(receptor)
    distance = np.linalg.norm(coords[:, None, :] - np.asarray(ligand_xyz, dtype=float)[None, :, :], axis=-1)
    near = distance.min(axis=1) <= cutoff
    counts: dict[str, int] = {}
    for chain, is_near in zip(chains, near):
        counts[chain] = counts.get(chain, 0) + int(is_near)
    if not any(counts.values()):
        raise StructureReadError(f"no receptor atom within {cutoff} Å of the ligand", receptor)
    return max(counts, key=counts.__getitem__)
