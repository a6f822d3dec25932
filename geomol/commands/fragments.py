"""``geomol fragments``: learn a principal-subgraph fragment vocabulary for ligand blocks.

``geomol fragments learn --size 300 --out vocab.json ligands1.sdf ligands2.mol2 lba/train`` reads
every molecule of the given SDF/MOL2 files (and the SMILES of ATOM3D LMDB records), learns the
vocabulary and writes it as JSON; configs then use it through ``data.init_args.fragments``.
``geomol fragments show vocab.json`` lists the learned fragment types.
"""
from __future__ import annotations

import argparse
import warnings
from pathlib import Path
from typing import Iterator

from rdkit import Chem

from geomol.data.complexes.fragment import FragmentVocab
from geomol.data.io import read_ligands
from geomol.errors import GeomolError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    learn = sub.add_parser("learn", allow_abbrev=False, help="learn a vocabulary from molecules")
    learn.add_argument("inputs", nargs="+", help="SDF / MOL2 files or ATOM3D LMDB folders")
    learn.add_argument("--out", required=True, help="vocabulary JSON to write")
    learn.add_argument("--size", type=int, default=300, help="number of fragment types (default 300)")
    learn.add_argument("--min-frequency", type=int, default=2, help="stop when pairs get rarer (default 2)")
    learn.add_argument("--max-atoms", type=int, help="largest fragment in heavy atoms (default: no limit)")
    show = sub.add_parser("show", allow_abbrev=False, help="list the fragment types of a vocabulary")
    show.add_argument("vocab")


def molecules(path: str | Path) -> Iterator[Chem.Mol]:
    """Molecules of a ligand file, or of the SMILES of an ATOM3D LMDB; unreadable records skipped."""
    path = Path(path)
    if path.is_dir() or path.suffix == ".mdb":
        from geomol.data.datasets.atom3d_lmdb import Atom3DReader

        reader = Atom3DReader(path)
        for i in range(len(reader)):
            mol = Chem.MolFromSmiles(str(reader[i].get("smiles") or ""))
            if mol is not None and mol.GetNumAtoms():
                yield mol
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield from read_ligands(path, skip_invalid=True)


def run(args: argparse.Namespace) -> int:
    if args.action == "show":
        vocab = FragmentVocab.load(args.vocab)
        for i, smiles in enumerate(vocab.fragments):
            print(f"{i:4d}  {smiles}")
        return 0
    mols = [m for path in args.inputs for m in molecules(path)]
    if not mols:
        raise GeomolError("no readable molecules", source=", ".join(args.inputs))
    vocab = FragmentVocab.learn(mols, size=args.size, min_frequency=args.min_frequency, progress=True,
                                max_atoms=args.max_atoms)
    vocab.save(args.out)
    print(f"{len(vocab)} fragment types from {len(mols)} molecules → {args.out}")
    return 0
