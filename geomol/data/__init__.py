"""Data layer: vocabularies, the graph of sets, readers and datasets.

The graph-of-sets types are imported eagerly; the readers (Biopython, RDKit) only on first use,
so that a model can be imported and used on ready-made graphs without loading the parsers.
"""
from importlib import import_module

from geomol.data.blocks import Block, BlockGraph
from geomol.data.vocab import VOCAB, BlockVocab

_LAZY = {
    "geomol.data.complexes.build": ("complex_from_blocks", "complex_from_files", "complex_from_pdb",
                                    "complex_from_structure", "pocket_blocks"),
    "geomol.data.io": ("Structure", "StructureWarning", "ligand_blocks", "ligand_names", "read_ligand", "read_ligands",
                       "read_structure"),
    "geomol.data.complexes.pocket": ("select_interface", "select_pocket"),
}
_SOURCE = {name: module for module, names in _LAZY.items() for name in names}

__all__ = ["Block", "BlockGraph", "BlockVocab", "VOCAB", *_SOURCE]


def __getattr__(name: str):
    if name in _SOURCE:
        return getattr(import_module(_SOURCE[name]), name)
    raise AttributeError(f"module 'geomol.data' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
