"""Protein–protein complexes as prediction inputs: one file holding two partners, named by their chains.

A complex is a structure file and its partners, ``"A,B:C"`` (chains A and B against chain C; without commas
each character is one chain, ``"AB:C"``, as in PDB files). Each file is read once; before its interface
graph is built (:func:`~geomol.data.complexes.build.complex_from_partners`, with the model's interface
cutoff), the partners are checked, and a complex that fails gets its error in its record while the others
are predicted:

* a chain that is not in the file → :class:`~geomol.errors.LigandNotFoundError` naming it and the chains present;
* a partner with fewer than :data:`MIN_PARTNER_RESIDUES` amino-acid or nucleotide residues (a small molecule,
  an ion, a dipeptide) → :class:`~geomol.errors.InputCheckError` pointing to the small-molecule path
  (``geomol predict-affinity --receptor FILE --ligands RESNAME``);
* no interface (no heavy atoms of the two partners within the cutoff) → :class:`~geomol.errors.EmptySelectionError`.

Many complexes come from a CSV (:func:`read_complexes`: columns ``complex``, ``partners`` and optional ``name``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Iterator, Sequence

from geomol.data.complexes.build import complex_from_partners
from geomol.data.io import Structure
from geomol.data.vocab import residue_block_symbol
from geomol.errors import ConfigError, DatasetError, GeomolError, InputCheckError, LigandNotFoundError
from geomol.inference.affinity import AffinityPrediction, predict_inputs
from geomol.inference.affinity_model import AffinityModel
from geomol.inference.findings import exception_findings
from geomol.inference.ligand_inputs import LigandInput
from geomol.inference.tables import csv_rows

__all__ = ["MIN_PARTNER_RESIDUES", "Partners", "ComplexEntry", "read_complexes", "complex_entries", "check_partners",
           "complex_input", "predict_complexes"]

MIN_PARTNER_RESIDUES = 3
"""A partner needs at least this many amino-acid or nucleotide residues (the smallest partner of the
protein–protein training set is a tripeptide); smaller ones are ligands, for the small-molecule models."""


@dataclass(frozen=True)
class Partners:
    """Two disjoint, non-empty chain groups: ``a`` (segment 0) and ``b`` (segment 1)."""

    a: tuple[str, ...]
    b: tuple[str, ...]

    @classmethod
    def parse(cls, text: str, source: str | None = None) -> "Partners":
        """``'A,B:C'`` or ``'AB:C'`` → ``Partners(('A', 'B'), ('C',))``.

        Raises:
            ConfigError: not two chain groups separated by one colon, an empty group, a chain on both sides.
        """
        sides = str(text).strip().split(":")
        if len(sides) != 2:
            raise ConfigError(f"partners {text!r}: give two chain groups separated by ':' (e.g. 'A,B:C')", source)
        groups = [tuple(c for c in re.split(r"[,\s]+", side) if c) if re.search(r"[,\s]", side.strip())
                  else tuple(side.strip()) for side in sides]
        if not all(groups):
            raise ConfigError(f"partners {text!r}: each side needs at least one chain (e.g. 'A,B:C')", source)
        both = sorted(set(groups[0]) & set(groups[1]))
        if both:
            raise ConfigError(f"partners {text!r}: chain(s) {', '.join(both)} on both sides", source)
        return cls(*groups)

    def __str__(self) -> str:
        return f"{','.join(self.a)}:{','.join(self.b)}"


@dataclass(frozen=True)
class ComplexEntry:
    """One complex to predict: the file, its partners and the name its record gets (default: the file name)."""

    path: Path
    partners: Partners
    name: str = ""


def read_complexes(path: str | PathLike) -> list[ComplexEntry]:
    """Complexes of a CSV with columns ``complex`` (file, relative to the CSV), ``partners`` (``A,B:C``) and
    optional ``name``.

    Raises:
        DatasetError: unreadable CSV, missing columns or empty cells (naming the line); ConfigError: bad partners.
    """
    folder = Path(path).resolve().parent
    entries = []
    for line, row in enumerate(csv_rows(path, ["complex", "partners"], "complexes"), start=2):
        where = f"{path}:{line}"
        if not row["complex"] or not row["partners"]:
            raise DatasetError("empty complex or partners", source=where)
        file = Path(row["complex"])
        entries.append(ComplexEntry(file if file.is_absolute() else folder / file,
                                    Partners.parse(row["partners"], where), row.get("name", "")))
    return entries


def complex_entries(complexes, partners: str | Partners | None = None) -> list[ComplexEntry]:
    """The entries of any accepted ``complexes`` argument (see :func:`geomol.api.predict_complex_affinity`): a file
    (or a list of files) with ``partners``; ``(file, partners[, name])`` tuples; a CSV of complexes.

    Raises:
        ConfigError: partners missing or given twice; DatasetError: an unreadable CSV.
    """
    if isinstance(partners, str):
        partners = Partners.parse(partners)
    if isinstance(complexes, (str, PathLike)) and Path(complexes).suffix.lower() == ".csv":
        if partners is not None:
            raise ConfigError("a CSV of complexes names each complex's partners: give no partners with it",
                              source=complexes)
        return read_complexes(complexes)
    items = [complexes] if isinstance(complexes, (str, PathLike, ComplexEntry)) else list(complexes)
    entries = []
    for item in items:
        if isinstance(item, ComplexEntry):
            entries.append(item)
        elif isinstance(item, (tuple, list)):
            if partners is not None or not 2 <= len(item) <= 3:
                raise ConfigError(f"{item!r}: give (file, partners[, name]) tuples, or files with partners=")
            entries.append(ComplexEntry(Path(item[0]), Partners.parse(str(item[1]), str(item[0])),
                                        str(item[2]) if len(item) == 3 else ""))
        elif partners is None:
            raise ConfigError(f"{item}: name the partners, e.g. partners='A,B:C'", source=str(item))
        else:
            entries.append(ComplexEntry(Path(item), partners))
    if not entries:
        raise ConfigError("no complexes given")
    return entries


def _polymer_residues(structure: Structure, chains: Sequence[str]) -> tuple[int, list[str]]:
    """(amino-acid and nucleotide residues of ``chains``, the names of their other residues)."""
    mask = structure.residue_mask(chains=list(chains))
    names = [structure.resnames[i] for i in range(structure.num_residues) if mask[i]]
    polymer = [n for n in names if (residue_block_symbol(n) or "").isupper()]  # element blocks are lower case
    return len(polymer), sorted(set(names) - set(polymer))


def check_partners(structure: Structure, partners: Partners) -> None:
    """Raise for a missing chain or a ligand-sized partner (module notes)."""
    present = sorted(set(structure.chains))
    for label, chains in (("first", partners.a), ("second", partners.b)):
        missing = [c for c in chains if c not in present]
        if missing:
            raise LigandNotFoundError(f"{label} partner: chain(s) {', '.join(missing)} not in the file (chains "
                                      f"present: {', '.join(present)})", source=structure.source)
    for label, chains in (("first", partners.a), ("second", partners.b)):
        count, others = _polymer_residues(structure, chains)
        if count < MIN_PARTNER_RESIDUES:
            what = f" and {', '.join(others)}" if others else ""
            example = others[0] if others else "RESNAME"
            raise InputCheckError(
                f"the {label} partner (chain(s) {','.join(chains)}) is ligand-sized: {count} amino-acid or "
                f"nucleotide residue(s){what}, fewer than {MIN_PARTNER_RESIDUES}; a protein–protein model does not "
                f"score small molecules: use `geomol predict-affinity --receptor {Path(structure.source).name} "
                f"--ligands {example}` (a protein–ligand model)", source=structure.source)


def complex_input(entry: ComplexEntry, model: AffinityModel) -> LigandInput:
    """The checked interface graph of one complex (read once, built with the model's recipe), or its error."""
    name = entry.name or entry.path.name
    source = f"{entry.path} [{entry.partners}]"
    try:
        structure = model.recipe.read_receptor(entry.path)
        check_partners(structure, entry.partners)
        graph = complex_from_partners(structure, entry.partners.a, entry.partners.b,
                                      pocket_cutoff=model.recipe.pocket_cutoff,
                                      keep_hydrogens=model.recipe.keep_hydrogens, name=name)
    except GeomolError as exc:
        return LigandInput(name, source, error=str(exc), findings=exception_findings(exc))
    # graph + chains: predicted as built here, and checked as a partner inside its file (geometry, contacts)
    return LigandInput(name, source, chains=entry.partners.b, graph=graph)


def predict_complexes(entries: Sequence[ComplexEntry], model: AffinityModel, *, batch_size: int = 32,
                      max_blocks: int = 4000) -> Iterator[AffinityPrediction]:
    """One record per complex, in order (``receptor`` = the file, ``extra['partners']`` = ``'A,B:C'``); a
    complex that fails a check or cannot be read gets its error, the others are predicted."""
    for start in range(0, len(entries), batch_size):
        chunk = entries[start:start + batch_size]
        inputs = [complex_input(entry, model) for entry in chunk]
        for entry, record in zip(chunk, predict_inputs(None, inputs, model, batch_size=batch_size,
                                                       max_blocks=max_blocks)):
            record.receptor = str(entry.path)
            record.extra["partners"] = str(entry.partners)
            yield record
