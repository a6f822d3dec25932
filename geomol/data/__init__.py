"""Data layer: vocabularies, the graph of sets, readers and datasets."""
from geomol.data.blocks import Block, BlockGraph
from geomol.data.complex import (
    complex_from_blocks,
    complex_from_files,
    complex_from_pdb,
    complex_from_structure,
    pocket_blocks,
)
from geomol.data.io import (
    Structure,
    StructureWarning,
    ligand_blocks,
    ligand_names,
    read_ligand,
    read_ligands,
    read_structure,
)
from geomol.data.pocket import select_interface, select_pocket
from geomol.data.vocab import VOCAB, BlockVocab

__all__ = [
    "Block", "BlockGraph", "BlockVocab", "VOCAB",
    "Structure", "StructureWarning", "read_structure", "read_ligand", "read_ligands", "ligand_names",
    "ligand_blocks", "pocket_blocks", "select_pocket", "select_interface",
    "complex_from_files", "complex_from_structure", "complex_from_pdb", "complex_from_blocks",
]
