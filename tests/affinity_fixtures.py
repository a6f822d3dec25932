"""Tiny trained-model files and transformed inputs for the affinity API and command tests.

Checkpoints are written by Lightning itself (``Trainer.save_checkpoint`` of an
:class:`~geomol.tasks.AffinityModule`), so the tests read the same layout ``geomol fit`` writes.
The models are tiny (hidden 16, one layer) with seeded random weights: the tests check the
plumbing (preprocessing reuse, batching, records, files), not accuracy.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from rdkit import Chem
from rdkit.Geometry import Point3D

TINY_GET = dict(hidden=16, radial_dim=8, num_rbf=8, edge_embedding_dim=8, num_layers=1, num_heads=2)
PREPROCESSING = {"pocket_cutoff": 10.0, "keep_hydrogens": False, "fragments": None}


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Predict on one thread: on the shared 2-core CI machine, two threads under load run several times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _positive_small_pk(energy_ffn: torch.nn.Sequential) -> None:
    """Keep the random weights but make every block add a small positive amount to pK.

    Predictions outside the physical pK range (0–15) are refused; raw random weights give pK
    around −5. A positive bias before the last SiLU and non-positive, scaled last weights make
    each block's energy small and negative (pK = −Σ energies), still depending on the input.
    """
    with torch.no_grad():
        energy_ffn[1].bias.add_(2.0)
        energy_ffn[3].weight.copy_(-0.005 * energy_ffn[3].weight.abs())


def lightning_checkpoint(path: Path, seed: int = 0, preprocessing: dict | None = None,
                         num_block_types: int = 150) -> Path:
    """Write a Lightning checkpoint of a tiny AffinityModule with seeded random weights."""
    import lightning.pytorch as pl

    from geomol.data.complexes.recipe import ComplexRecipe
    from geomol.tasks import AffinityModule

    torch.manual_seed(seed)
    module = AffinityModule(**TINY_GET, num_block_types=num_block_types)
    _positive_small_pk(module.model.energy_ffn)
    module.recipe = ComplexRecipe.from_dict(PREPROCESSING if preprocessing is None else preprocessing)
    trainer = pl.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, accelerator="cpu")
    trainer.strategy.connect(module)
    trainer.save_checkpoint(path)
    return path


def tiny_model_dir(out: Path, members: int = 2, preprocessing: dict | None = None, num_block_types: int = 150) -> Path:
    """Export an ensemble of tiny checkpoints as a shipped-model directory ``out``."""
    from geomol.api import export_model

    out.parent.mkdir(parents=True, exist_ok=True)
    ckpts = [lightning_checkpoint(out.parent / f"{out.name}_{i}.ckpt", seed=i, preprocessing=preprocessing,
                                  num_block_types=num_block_types) for i in range(members)]
    return export_model(ckpts, out, card="# tiny test model\n\nRandom weights; for tests only.\n")


def write_sdf(mols, path: Path) -> Path:
    writer = Chem.SDWriter(str(path))
    for mol in mols:
        writer.write(mol)
    writer.close()
    return path


def transformed_pdb(src: Path, dst: Path, q: np.ndarray, t: np.ndarray) -> Path:
    """Copy of a PDB with every ATOM/HETATM coordinate mapped to x Qᵀ + t (Å)."""
    lines = []
    for line in Path(src).read_text().splitlines(keepends=True):
        if line.startswith(("ATOM  ", "HETATM")):
            xyz = np.array([float(line[30:38]), float(line[38:46]), float(line[46:54])]) @ q.T + t
            line = f"{line[:30]}{xyz[0]:8.3f}{xyz[1]:8.3f}{xyz[2]:8.3f}{line[54:]}"
        lines.append(line)
    dst.write_text("".join(lines))
    return dst


def transformed_mol(mol: Chem.Mol, q: np.ndarray, t: np.ndarray) -> Chem.Mol:
    out = Chem.Mol(mol)
    conf = out.GetConformer()
    xyz = conf.GetPositions() @ q.T + t
    for i, (x, y, z) in enumerate(xyz):
        conf.SetAtomPosition(i, Point3D(float(x), float(y), float(z)))
    return out
