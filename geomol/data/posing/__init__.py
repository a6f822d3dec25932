"""Ligand poses: analogues posed from SMILES on a reference ligand (common core, constrained embedding) and
decoy complexes (a ligand moved out of its pose, turned, or swapped)."""
