"""Docking with AutoDock Vina in the reference ligand's box, for ligands without a common core with it.

The posing on the reference (:mod:`geomol.data.posing.poses`) needs a common core of a few heavy atoms;
a library ligand of another chemotype has none. With ``--dock`` such a ligand is docked instead:

1. the receptor is written as PDBQT by Meeko (``Polymer`` from the PDB text with Meeko's residue
   templates; residues it cannot type are left out and counted), once per worker process;
2. Vina's grid maps cover the reference ligand's heavy-atom bounding box plus ``padding`` Å per side,
   computed once per worker process;
3. each ligand: SMILES → hydrogens → one ETKDG conformer (seeded) → Meeko's PDBQT → Vina search
   (``exhaustiveness``, one CPU thread) → the best pose back as an RDKit molecule with hydrogens.

The docked pose is then scored by the affinity model like any posed ligand; the Vina score
(kcal/mol) is reported beside it. Needs the packages ``vina``, ``meeko`` and ``gemmi`` (extra ``screen``).
"""
from __future__ import annotations

import contextlib
import gzip
import io
import os
import tempfile
from pathlib import Path

import numpy as np
from rdkit import Chem
from rdkit.Chem import rdDistGeom

from geomol.data.io._source import rdkit_messages
from geomol.errors import ConfigError, DockingError
from geomol.screen.settings import DockSettings

__all__ = ["VinaDocker", "check_docking_available", "receptor_pdbqt"]


def check_docking_available() -> None:
    """Raise :class:`ConfigError` when Vina or Meeko is missing (before a screen starts, not in a worker)."""
    try:
        import gemmi  # noqa: F401 - Meeko imports it without declaring it
        import meeko  # noqa: F401
        import vina  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"--dock needs AutoDock Vina and Meeko ({exc.name} is not installed; "
                          "pip install 'geomol[screen]')") from None


def receptor_pdbqt(name: str, data: bytes) -> tuple[str, int]:
    """The receptor as rigid PDBQT text (Meeko) and how many residues Meeko could not type (left out).

    Raises:
        DockingError: not a PDB file, or Meeko cannot build the receptor.
    """
    from meeko import MoleculePreparation, PDBQTWriterLegacy, Polymer, ResidueChemTemplates

    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    suffixes = [s.lower() for s in Path(name).suffixes if s.lower() not in (".gz", ".bz2")]
    if suffixes and suffixes[-1] not in (".pdb", ".ent"):
        raise DockingError("docking needs the receptor as a PDB file", source=name)
    try:  # Meeko prints its template mismatches: kept out of the screen's output, counted instead
        with rdkit_messages(), contextlib.redirect_stdout(io.StringIO()):
            polymer = Polymer.from_pdb_string(data.decode("latin-1"), ResidueChemTemplates.create_from_defaults(),
                                              MoleculePreparation(), allow_bad_res=True)
            rigid, _flexible = PDBQTWriterLegacy.write_from_polymer(polymer)
    except Exception as exc:  # noqa: BLE001 - Meeko raises many kinds; the reason is what matters
        raise DockingError(f"Meeko cannot prepare the receptor ({type(exc).__name__}: {exc})", source=name) from exc
    return rigid, len(polymer.get_ignored_monomers())


def _ligand_pdbqt(smiles: str, seed: int) -> str:
    """PDBQT text of one seeded 3D conformer of ``smiles`` (hydrogens added)."""
    from meeko import MoleculePreparation, PDBQTWriterLegacy

    with rdkit_messages():
        mol = Chem.MolFromSmiles(smiles)
        if mol is None:
            raise DockingError(f"invalid SMILES {smiles!r}")
        mol = Chem.AddHs(mol)
        params = rdDistGeom.ETKDGv3()
        params.randomSeed = seed
        if rdDistGeom.EmbedMolecule(mol, params) != 0:
            raise DockingError("no 3D conformer could be embedded for docking")
    try:
        setup = MoleculePreparation().prepare(mol)[0]
        text, ok, error = PDBQTWriterLegacy.write_string(setup)
    except Exception as exc:  # noqa: BLE001 - Meeko's preparation errors are plain exceptions
        raise DockingError(f"Meeko cannot prepare the ligand ({type(exc).__name__}: {exc})") from exc
    if not ok:
        raise DockingError(f"Meeko cannot write the ligand ({error.strip()})")
    return text


class VinaDocker:
    """Vina with the receptor and the grid maps of the reference's box, ready to dock SMILES one by one.

    Args:
        receptor_name, receptor_data: the receptor file's name and bytes (PDB, plain or gzip).
        reference: the reference ligand (RDKit molecule with a conformer, Å): the box is around it.
        settings: :class:`~geomol.screen.settings.DockSettings`.
    """

    def __init__(self, receptor_name: str, receptor_data: bytes, reference: Chem.Mol, settings: DockSettings):
        from vina import Vina

        self.settings = settings
        rigid, self.ignored_residues = receptor_pdbqt(receptor_name, receptor_data)
        xyz = Chem.RemoveHs(reference).GetConformer().GetPositions()
        self.center = (xyz.min(0) + xyz.max(0)) / 2
        self.size = xyz.max(0) - xyz.min(0) + 2 * settings.padding
        self._vina = Vina(sf_name="vina", cpu=1, seed=settings.seed, verbosity=0)
        with tempfile.TemporaryDirectory() as folder:  # Vina reads the receptor from a file only
            path = os.path.join(folder, "receptor.pdbqt")
            Path(path).write_text(rigid)
            self._vina.set_receptor(path)
        self._vina.compute_vina_maps(center=self.center.tolist(), box_size=self.size.tolist())

    def dock(self, smiles: str, name: str = "") -> tuple[Chem.Mol, float]:
        """The best Vina pose of ``smiles`` (RDKit molecule with hydrogens, one conformer, Å) and its score (kcal/mol).

        Raises:
            DockingError: the ligand cannot be prepared or docked.
        """
        from meeko import PDBQTMolecule, RDKitMolCreate

        self._vina.set_ligand_from_string(_ligand_pdbqt(smiles, self.settings.seed))
        self._vina.dock(exhaustiveness=self.settings.exhaustiveness, n_poses=1)
        score = float(self._vina.energies(n_poses=1)[0][0])
        with rdkit_messages():
            mols = RDKitMolCreate.from_pdbqt_mol(PDBQTMolecule(self._vina.poses(n_poses=1), skip_typing=True))
        if not mols or mols[0] is None or not np.isfinite(score):
            raise DockingError("Vina returned no usable pose")
        pose = mols[0]
        pose.SetProp("_Name", name or smiles)
        pose.SetProp("smiles", smiles)
        return pose, score
