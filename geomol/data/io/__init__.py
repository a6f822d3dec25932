"""Structure readers: PDB/mmCIF (Biopython) and SDF/MOL2 (RDKit) to arrays, molecules and Blocks."""
from geomol.data.io._source import StructureWarning, detect_format, read_text
from geomol.data.io.ligand import ligand_blocks, structure_ligand_blocks
from geomol.data.io.molecule import ligand_names, read_ligand, read_ligands
from geomol.data.io.pdb import WATER_NAMES, read_structure
from geomol.data.io.structure import Structure

__all__ = ["Structure", "StructureWarning", "WATER_NAMES", "detect_format", "ligand_blocks", "ligand_names",
           "read_ligand", "read_ligands", "read_structure", "read_text", "structure_ligand_blocks"]
