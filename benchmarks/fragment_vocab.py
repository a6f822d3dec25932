"""Learn a principal-subgraph fragment vocabulary on all PLB + FEP-benchmark ligands.

Prints a table (learning time, vocabulary size, fragmenting time, mean blocks vs atoms per
ligand) for the plain algorithm and for a fragment-size cap, and writes it as JSON to
``benchmarks/results/fragment_vocab.json``. Run from the repository root:

    python benchmarks/fragment_vocab.py [--size 300] [--max-atoms 12]
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch
from rdkit import Chem, RDLogger

from geomol.data.complexes.fragment import FragmentVocab
from geomol.data.paths import shared_data_dir
from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = shared_data_dir()
RESULTS = REPO / "benchmarks" / "results" / "fragment_vocab.json"


def ligand_files() -> list[Path]:
    plb = sorted(SHARED_DATA.glob("plb/*/02_ligands/ligands.sdf"))
    fep = sorted(SHARED_DATA.glob("fep_benchmark/*/*_ligands.sdf"))
    if not plb or not fep:
        raise SystemExit(f"PLB / FEP ligands not found under {SHARED_DATA} (set GEOMOL_SHARED_DATA)")
    return plb + fep


def read_ligands(files: list[Path]) -> list[Chem.Mol]:
    """Every ligand with its explicit hydrogens; an unreadable record is counted and skipped."""
    mols, skipped = [], 0
    for path in files:
        for mol in Chem.SDMolSupplier(str(path), removeHs=False):
            if mol is None:
                skipped += 1
            else:
                mols.append(mol)
    if skipped:
        print(f"warning: skipped {skipped} unreadable ligand records")
    return mols


def run(mols: list[Chem.Mol], size: int, max_atoms: int | None) -> dict:
    start = time.perf_counter()
    vocab = FragmentVocab.learn(mols, size=size, max_atoms=max_atoms)
    learn_s = time.perf_counter() - start
    start = time.perf_counter()
    groups = [vocab.fragment(m) for m in mols]
    fragment_s = time.perf_counter() - start
    blocks = sum(len(g) for g in groups)
    fragment_blocks = [sum(m.GetAtomWithIdx(i).GetAtomicNum() != 1 for i in atoms)
                       for m, g in zip(mols, groups) for atoms, symbol in g if symbol.startswith("@")]
    return {
        "max_atoms": max_atoms,
        "learn_s": round(learn_s, 2),
        "vocab_size": len(vocab),
        "merge_steps": len(vocab.merges),
        "last_merge_count": vocab.counts[-1] if vocab.counts else None,
        "fragment_ms_per_ligand": round(1000 * fragment_s / len(mols), 2),
        "blocks_per_ligand": round(blocks / len(mols), 2),
        "fragment_blocks_per_ligand": round(len(fragment_blocks) / len(mols), 2),
        "heavy_atoms_per_fragment_block": round(sum(fragment_blocks) / max(len(fragment_blocks), 1), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=300, help="fragment types to learn")
    parser.add_argument("--max-atoms", type=int, default=12, help="heavy-atom cap for the second row")
    args = parser.parse_args()
    torch.set_num_threads(1)
    RDLogger.DisableLog("rdApp.*")
    files = ligand_files()
    mols = read_ligands(files)
    heavy = sum(m.GetNumHeavyAtoms() for m in mols) / len(mols)
    atoms = sum(m.GetNumAtoms() for m in mols) / len(mols)
    rows = [run(mols, args.size, None), run(mols, args.size, args.max_atoms)]

    print(f"{len(mols)} ligands from {len(files)} files; {heavy:.1f} heavy atoms, {atoms:.1f} atoms with H per ligand")
    header = ("max_atoms", "learn_s", "vocab_size", "merge_steps", "fragment_ms_per_ligand",
              "blocks_per_ligand", "heavy_atoms_per_fragment_block")
    print(" | ".join(f"{h:>12}" for h in header))
    for row in rows:
        print(" | ".join(f"{str(row[h]):>12}" for h in header))

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "benchmark": "fragment_vocab",
        "ligands": len(mols),
        "files": len(files),
        "heavy_atoms_per_ligand": round(heavy, 2),
        "atoms_per_ligand_with_h": round(atoms, 2),
        "size": args.size,
        "rows": rows,
        "machine": {"python": platform.python_version(), "rdkit": Chem.rdBase.rdkitVersion,
                    "processor": platform.processor() or platform.machine(), "threads": 1},
        "provenance": provenance(),
    }
    RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
