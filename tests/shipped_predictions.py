"""Predictions of the shipped models on a few real inputs, every value as float64.

``python -m tests.shipped_predictions tests/inference/shipped_predictions.npz`` records them (one array per
``model/quantity``); after re-shipping one model, ``python -m tests.shipped_predictions
tests/inference/shipped_predictions.npz --only egno-fkbp12`` re-records that model's arrays and keeps the others
(arrays of models no longer shipped are dropped);
``tests/inference/test_shipped_predictions.py`` recomputes them and compares every number with the recorded
file (``tests/inference/shipped_predictions.npz``): bit for bit on a machine like the one that recorded it
(:func:`machine_signature`: the same CPU model, instruction sets and torch), to float32 round-off elsewhere.
"""
from __future__ import annotations

import argparse
import hashlib
import platform
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

import geomol
from tests.conftest import REPO, SHARED_DATA

EXAMPLE = REPO / "data" / "example"


MACHINE = "_machine"
"""The recorded file's entry holding :func:`machine_signature` of the machine that recorded it."""


def machine_signature() -> str:
    """A digest of what decides the last bits of a prediction: the CPU model and its instruction-set flags (which
    kernels run and in what order they sum) and the torch version."""
    cpu = platform.processor()
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = " ".join(next((line for line in lines if line.startswith(key)), "") for key in ("model name", "flags"))
    except OSError:
        pass
    return hashlib.sha256(f"{platform.machine()} {cpu} torch {torch.__version__}".encode()).hexdigest()[:16]


def _values(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape(-1)


AFFINITY_MODELS = ("get-plb", "contact-corpus")


def affinity(model: str) -> dict[str, np.ndarray]:
    """A shipped affinity model on the bundled TNKS2 example (first 4 ligands): pK mean and spread."""
    from geomol.data.io import read_ligands

    ligands = read_ligands(EXAMPLE / "tnks2_ligands.sdf")[:4]
    records = geomol.predict_affinity(EXAMPLE / "tnks2_protein.pdb", ligands, model=model)
    return {"pK": _values([r.pK for r in records]), "pK_std": _values([r.pK_std for r in records])}


def nbody() -> np.ndarray:
    from geomol.data.datasets.trajectories.nbody import ChargedParticles, draw_initial_states, simulate

    system = ChargedParticles()
    charges, loc, vel = draw_initial_states(2, np.random.RandomState(7), system)
    positions, velocities = simulate(charges, loc, vel, system)
    out = geomol.rollout_arrays("egno-nbody", positions[0, 30], velocities[0, 30], charges=charges[0], windows=2)
    return _values(out.positions)


def mocap() -> np.ndarray | None:
    path = SHARED_DATA / "mocap_run" / "cmu_subject09_run.npz"
    if not path.exists():
        return None
    from geomol.data.datasets.trajectories.mocap import MocapDataset

    data = MocapDataset("test", path, num_timesteps=5, delta=30)
    t, s = data.samples[0]
    out = geomol.rollout_arrays("egno-mocap-run", data.positions[t][s], data.velocities[t][s], windows=1)
    return _values(out.positions)


# Amber ff99SB partial charges (e) of the backbone atoms of a non-glycine residue: the input needs no force field
BACKBONE_CHARGES = {"N": -0.4157, "CA": 0.0337, "C": 0.5973, "O": -0.5679}


def fkbp12() -> np.ndarray | None:
    """egno-fkbp12, one window from FKBP12 as prepared for Uni-FEP (no MD, no OpenMM): the atoms of the model's
    selection in ``../shared/data/uni_fep/Hermite__FKBP12/protein.pdb.gz``, a seeded velocity (normal, 0.02 Å per
    frame per axis, ``RandomState(12)``) and charges by atom name from :data:`BACKBONE_CHARGES` (0 for other
    names). None without the shared data."""
    path = SHARED_DATA / "uni_fep" / "Hermite__FKBP12" / "protein.pdb.gz"
    if not path.exists():
        return None
    from geomol.data.io.trajectory import open_selection

    model = geomol.load_model("egno-fkbp12")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, atoms = open_selection(path, None, model.protocol.selection)
    x = atoms.positions.astype(np.float64)
    v = np.random.RandomState(12).normal(scale=0.02, size=x.shape)
    charges = np.array([BACKBONE_CHARGES.get(str(name), 0.0) for name in atoms.names])
    out = geomol.rollout_arrays(model, x, v, charges=charges, windows=1)
    return _values(out.positions)


def molecule_window(model: str, molecule: str, read_graph: bool = False) -> np.ndarray | None:
    """``model``, one window from the seeded RDKit conformer of ``molecule`` as the generator simulates it (heavy
    atoms, zero velocity; a generative model draws with seed 0); ``read_graph``: a model of many molecules, given the
    molecule's graph as perceived from the conformer. None without RDKit."""
    try:
        from geomol.simulate.molecules import starting_structure
    except ImportError:
        return None
    from geomol.data.chemistry.covalent_graph import perceive_bonds
    from geomol.data.chemistry.molecule_graph import heavy_atom_graph
    from geomol.data.dynamics.systems import MoleculeGraph

    start = starting_structure(molecule, seed=3)
    heavy, bonds, hydrogens = heavy_atom_graph(start.numbers, perceive_bonds(start.numbers, start.positions))
    x = start.positions[heavy].astype(np.float64)
    graph = MoleculeGraph(start.numbers[heavy], bonds, hydrogens) if read_graph else None
    out = geomol.rollout_arrays(model, x, np.zeros_like(x), windows=1, seed=0, molecule=graph)
    return _values(out.positions)


NUCLEIC_COMPLEXES = ("3E5C", "2B57", "454D", "1F27")
"""A SAM riboswitch, a purine riboswitch, a drug on a DNA duplex and an aptamer (``../shared/data/nucleic_affinity``)."""


def nucleic() -> np.ndarray | None:
    """na-affinity on the complexes of :data:`NUCLEIC_COMPLEXES`: their pK, then their pK spread; None without the
    shared data."""
    root = SHARED_DATA / "nucleic_affinity"
    if not root.exists():
        return None
    records = [geomol.predict_affinity(root / pdb_id / "receptor.pdb", root / pdb_id / "ligand.sdf",
                                       model="na-affinity")[0] for pdb_id in NUCLEIC_COMPLEXES]
    return _values([r.pK for r in records] + [r.pK_std for r in records])


def ppa() -> np.ndarray:
    """ppa-affinity on the bundled 1ACB complex (chymotrypsin E, eglin c I): pK and its ensemble spread."""
    [record] = geomol.predict_complex_affinity(EXAMPLE / "1acb_complex.pdb.gz", "E:I", model="ppa-affinity")
    return _values([record.pK, record.pK_std])


PREDICTIONS = {"ppa-affinity/pK_and_std": ppa, "na-affinity/pK_and_spread": nucleic,
               "egno-nbody/positions": nbody, "egno-mocap-run/positions": mocap, "egno-fkbp12/positions": fkbp12,
               "egno-md17-aspirin/positions": lambda: molecule_window("egno-md17-aspirin", "aspirin"),
               "egno-md17-ethanol/positions": lambda: molecule_window("egno-md17-ethanol", "ethanol"),
               "egno-flow-ethanol/positions": lambda: molecule_window("egno-flow-ethanol", "ethanol"),
               "egno-flow-aspirin/positions": lambda: molecule_window("egno-flow-aspirin", "aspirin"),
               "egno-molecules/positions": lambda: molecule_window("egno-molecules", "paracetamol", read_graph=True)}


def record(only: str | None = None) -> dict[str, np.ndarray]:
    """``{'model/quantity': values}`` of every shipped model whose inputs are present (``only``: of that model)."""
    from geomol.nn.dense import linear_kernel, set_linear_kernel

    torch.set_num_threads(1)
    chosen = linear_kernel()
    set_linear_kernel("blas")  # the kernel is chosen by timing it: under load the choice, and so the last bits, vary
    try:
        out = {f"{model}/{key}": values for model in AFFINITY_MODELS if only in (None, model)
               for key, values in affinity(model).items()}
        out.update({name: predict() for name, predict in PREDICTIONS.items() if only in (None, name.split("/")[0])})
    finally:
        set_linear_kernel(chosen)
    return {name: values for name, values in out.items() if values is not None}


def _models() -> set[str]:
    return set(AFFINITY_MODELS) | {name.split("/")[0] for name in PREDICTIONS}


def main(argv: list[str]) -> None:
    """``OUT.npz`` records every model; ``OUT.npz --only MODEL`` re-records that model's arrays in OUT.npz and
    keeps the others as they are (after re-shipping one model's weights)."""
    parser = argparse.ArgumentParser(prog="python -m tests.shipped_predictions", description=main.__doc__)
    parser.add_argument("out", type=Path, help="the npz file (tests/inference/shipped_predictions.npz)")
    parser.add_argument("--only", metavar="MODEL", help="re-record only this shipped model")
    args = parser.parse_args(argv)
    kept = {}
    if args.only:
        with np.load(args.out, allow_pickle=False) as recorded:
            kept = {k: recorded[k] for k in recorded.files if k.split("/")[0] in _models() - {args.only}}
            if str(recorded.get(MACHINE, "")) != machine_signature():
                raise SystemExit("the file was recorded on another machine: re-record every model (no --only)")
    now = record(args.only)
    if args.only and not now:
        raise SystemExit(f"no prediction of {args.only!r} (a shipped model name, its inputs present)")
    np.savez_compressed(args.out, **{**kept, **now, MACHINE: np.array(machine_signature())})


if __name__ == "__main__":
    main(sys.argv[1:])
