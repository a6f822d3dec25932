"""The stable Python surface of geomol: load trained models and predict with them.

* :func:`load_model` / :func:`export_model` — shipped models by name, model directories,
  Lightning checkpoints from ``geomol fit`` (read safely, tensors only);
* :func:`predict_affinity` — binding affinity (pK, ΔG, Kd, ensemble spread) of ligands against a
  receptor with a GET model;
* :func:`predict_complex_affinity` — binding affinity (ΔG, Kd, pK with the ensemble spread) of protein–protein
  complexes, each one file with its partner chains (shipped model ``ppa-affinity``);
* :func:`finetune_affinity` — adapt an affinity model to one target from a handful of its measured ligands;
* :func:`rollout` / :func:`rollout_arrays` — long trajectories from a trained EGNO, window after
  window, from a frame of an MD trajectory (written to a trajectory file) or from any in-memory
  state (N-body, Mocap);
* :func:`evaluate_rollouts` / :func:`evaluate_rollout_arrays` — trajectory models, the no-motion and
  linear baselines and the reference MD on the same windows of a held-out trajectory (files or arrays):
  one table of S2S / S2T MSE and chemistry.

Example::

    import geomol
    results = geomol.predict_affinity("protein.pdb", "ligands.sdf")          # the shipped default model
    results = geomol.predict_affinity("complex.pdb", "UNK", model="runs/.../last.ckpt")
    results = geomol.predict_affinity("protein.pdb", ["CCOc1ccccc1", ("lig-7", "c1ccncc1N")], reference="ref.sdf")
    [record] = geomol.predict_complex_affinity("complex.pdb", "A,B:C")                # protein–protein
    for r in results:
        print(r.name, r.pK, r.pK_std, r.error)
    geomol.rollout("egno-fkbp12", "topology.pqr", "trajectory.dcd", start=0, frames=200, out="rollout.xtc",
                   reference=True)

The implementation lives in :mod:`geomol.inference`; this module only states the contract.
"""
from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from geomol.data.blocks import BlockGraph
from geomol.data.chemistry.covalent_graph import CovalentGraph
from geomol.data.io import Structure
from geomol.data.posing.poses import PoseParameters, write_poses as _write_poses
from geomol.errors import ConfigError
from geomol.inference.affinity import AffinityPrediction, predict_inputs, read_receptor
from geomol.inference.affinity_model import AffinityModel
from geomol.inference.anchor_ligands import anchor_affinity, finetune_method
from geomol.inference.complex_inputs import complex_entries, predict_complexes
from geomol.training.finetune import FinetuneSettings, finetune_card, finetune_on_ligands
from geomol.training.finetune_choice import FinetuneChoice
from geomol.inference.ligand_inputs import LigandInput, graph_inputs, ligand_inputs, select_ligand
from geomol.inference.dynamics.dynamics_model import DynamicsModel
from geomol.inference.loading import ModelReference, export_model, load_model
from geomol.inference.model_files import list_shipped_models
from geomol.inference.dynamics.rollout import ArrayRollout, rollout_arrays as _rollout_arrays
from geomol.inference.dynamics.rollout_evaluation import RolloutTable, evaluate_trajectory
from geomol.inference.dynamics.rollout_evaluation import evaluate_rollouts as _evaluate_arrays
from geomol.inference.dynamics.rollout_files import TrajectoryRollout, rollout_trajectory
from geomol.inference.smiles_inputs import posed_inputs

__all__ = ["load_model", "export_model", "list_models", "predict_affinity", "iter_affinity", "predict_complex_affinity",
           "finetune_affinity",
           "rollout", "rollout_arrays", "evaluate_rollouts", "evaluate_rollout_arrays", "RolloutTable", "AffinityModel",
           "AffinityPrediction", "DynamicsModel", "LigandInput", "TrajectoryRollout", "ArrayRollout", "PoseParameters",
           "ligand_inputs", "posed_inputs", "select_ligand"]


# ---------------------------------------------------------------------- models
def list_models(task: str | None = None) -> list[dict[str, Any]]:
    """The shipped models that :func:`load_model` finds by name (``$GEOMOL_MODELS``, then the repository's
    ``models/``), from their manifests (no weights are read).

    Args:
        task: ``"affinity"`` or ``"dynamics"`` for one kind only; None lists all.

    Returns:
        one dict per model, sorted by name: ``name``, ``task``, ``description``, ``architecture``,
        ``members`` (ensemble size), ``aliases`` (``["default"]`` for the default affinity model), ``path``.
    """
    return list_shipped_models(task)


# ---------------------------------------------------------------------- binding affinity
def _affinity_model(model: ModelReference, device: str) -> AffinityModel:
    loaded = load_model(model, device=device)
    if not isinstance(loaded, AffinityModel):
        raise ConfigError(f"{loaded!r} is not a binding-affinity model")
    return loaded


def predict_affinity(receptor: str | PathLike | Structure | BlockGraph | Sequence[BlockGraph], ligands: Any = None,
                     model: ModelReference = "default", pocket_cutoff: float | None = None, device: str = "cpu",
                     batch_size: int = 32, *, max_blocks: int = 4000,
                     receptor_chains: Sequence[str] | None = None, reference: Any = None,
                     pose_parameters: PoseParameters | None = None,
                     write_poses: str | PathLike | None = None) -> list[AffinityPrediction]:
    """Predict the binding affinity of each ligand to the receptor.

    Args:
        receptor: a PDB/mmCIF file (plain, .gz or .bz2) of a protein, DNA or RNA, or an already
            read :class:`~geomol.data.io.Structure`; or ready-made complexes (a BlockGraph or a
            list of them, with ``ligands=None``), which are predicted as they are.
        ligands: one item or a list of them — SDF/MOL2 files (every molecule), PDB/mmCIF files
            of a lone ligand, RDKit molecules with 3D coordinates, a residue name inside the
            receptor file (``"UNK"``), or a chain group of it for protein–protein complexes
            (``"chain:B"``, ``"chains:H,L"``).
        model: shipped-model name (``"default"``), model directory, ``.ckpt`` path, list of
            ``.ckpt`` paths (an ensemble) or a model from :func:`load_model` (reuse it across
            calls to load only once).
        pocket_cutoff: Å. None (default) uses the cutoff the model was trained with; a number
            overrides it. Hydrogens and ligand fragments always follow the model.
        device: torch device for the model (``"cpu"``, ``"cuda"``).
        batch_size: complexes per forward pass; max_blocks: most blocks in one forward pass.
        receptor_chains: use only these chains of the receptor.
        reference: a reference ligand pose (SDF/MOL2 file, first molecule, or an RDKit Mol). With it,
            ``ligands`` are SMILES — strings, ``(name, smiles)`` pairs, or ``.smi``/``.csv`` files
            (columns ``smiles`` and ``name``) — and each is posed on the reference by its common
            core (:mod:`geomol.data.posing.poses`) before prediction; the pose report (core_atoms,
            core_rmsd Å, min_receptor_distance Å, clashes) comes in each record's ``extra``.
        pose_parameters: :class:`~geomol.data.posing.poses.PoseParameters` (defaults when None).
        write_poses: with ``reference``, also write the poses to this SD file.

    Returns:
        one :class:`~geomol.inference.affinity.AffinityPrediction` per ligand, in input order:
        name, pK (ensemble mean), dG_kcal_mol (298.15 K), Kd_M (mol/L), pK_std (spread of the
        ensemble members; NaN with one member), n_pocket_blocks, error, warnings. A ligand that
        cannot be read or fails an input check (2D or collapsed pose, a protein as the ligand, not
        in a pocket, a non-biomolecular receptor, an unphysical pK; ``docs/predict.md``) comes back
        with ``error`` set and NaN numbers; the others are still predicted. ``warnings`` lists why
        a reported number may mean little (outside the model's applicability domain).

    Raises:
        ModelLoadError: the model cannot be found or loaded.
        GeomolError subclasses: the receptor cannot be read, or invalid arguments.
    """
    return list(iter_affinity(receptor, ligands, model, pocket_cutoff, device, batch_size, max_blocks=max_blocks,
                              receptor_chains=receptor_chains, reference=reference,
                              pose_parameters=pose_parameters, write_poses=write_poses))


def iter_affinity(receptor: str | PathLike | Structure | BlockGraph | Sequence[BlockGraph], ligands: Any = None,
                  model: ModelReference = "default", pocket_cutoff: float | None = None, device: str = "cpu",
                  batch_size: int = 32, *, max_blocks: int = 4000,
                  receptor_chains: Sequence[str] | None = None, reference: Any = None,
                  pose_parameters: PoseParameters | None = None,
                  write_poses: str | PathLike | None = None) -> Iterator[AffinityPrediction]:
    """:func:`predict_affinity`, one record at a time as predictions are made (for progress bars and long
    screens); ``ligands`` may also hold :class:`~geomol.inference.ligand_inputs.LigandInput` items
    (e.g. from :func:`select_ligand`). The model is loaded, and an unreadable receptor raises, at the first ``next``."""
    loaded = _affinity_model(model, device)
    if isinstance(receptor, BlockGraph) or (isinstance(receptor, (list, tuple)) and receptor
                                            and all(isinstance(g, BlockGraph) for g in receptor)):
        if ligands is not None:
            raise ConfigError("ligands must be None when the receptor argument holds ready-made complexes")
        yield from predict_inputs(None, graph_inputs(receptor), loaded, batch_size=batch_size, max_blocks=max_blocks)
        return
    if reference is not None:
        receptor = read_receptor(receptor, loaded)  # read once: posing and prediction share it
        inputs, posed = posed_inputs(receptor, ligands, reference, receptor_chains=receptor_chains,
                                     parameters=pose_parameters)
        if write_poses is not None:
            _write_poses(write_poses, posed)
    elif write_poses is not None or pose_parameters is not None:
        raise ConfigError("write_poses and pose_parameters need a reference ligand (reference=...)")
    else:
        inputs = ligand_inputs(ligands)
    yield from predict_inputs(receptor, inputs, loaded, pocket_cutoff=pocket_cutoff,
                              batch_size=batch_size, max_blocks=max_blocks, receptor_chains=receptor_chains)


def predict_complex_affinity(complexes: Any, partners: str | None = None, model: ModelReference = "ppa-affinity",
                             device: str = "cpu", batch_size: int = 32, *, max_blocks: int = 4000
                             ) -> list[AffinityPrediction]:
    """Predict the binding affinity of protein–protein complexes, each one structure file holding both partners.

    Args:
        complexes: a PDB/mmCIF file (plain, .gz or .bz2) with ``partners``; a list of files (all with
            ``partners``); a list of ``(file, partners)`` or ``(file, partners, name)`` tuples; or a CSV with
            columns ``complex`` (file, relative to the CSV), ``partners`` and optional ``name``.
        partners: the two chain groups, ``"A,B:C"`` (chains A and B against C; ``"AB:C"`` also reads as one
            chain per character).
        model: the shipped protein–protein model ``"ppa-affinity"`` (default), a model directory, checkpoints or
            a loaded model.
        device, batch_size, max_blocks: as for :func:`predict_affinity`.

    Returns:
        one :class:`~geomol.inference.affinity.AffinityPrediction` per complex, in order: ``dG_kcal_mol``
        (298.15 K), ``Kd_M``, ``pK`` and ``pK_std`` (the spread of the ensemble members, in pK; × 1.364 for
        kcal/mol), ``receptor`` = the file, ``extra['partners']``. A complex that cannot be predicted comes back
        with ``error`` set and NaN numbers: a chain that is not in the file, a ligand-sized partner (fewer than
        3 amino-acid or nucleotide residues: use :func:`predict_affinity` with a protein–ligand model), no
        interface within the model's cutoff, an unreadable file.

    Raises:
        ConfigError: partners missing, malformed or given twice. ModelLoadError: the model cannot be loaded.
    """
    entries = complex_entries(complexes, partners)
    return list(predict_complexes(entries, _affinity_model(model, device), batch_size=batch_size,
                                  max_blocks=max_blocks))


def finetune_affinity(receptor: str | PathLike | Structure, ligands: Any, measured: dict[str, float],
                      model: ModelReference = "default", *, out: str | PathLike | None = None, name: str = "",
                      steps: int | None = None, lr: float | None = None, anchor: float | None = None,
                      receptor_chains: Sequence[str] | None = None, overwrite: bool = False,
                      method: str = "auto") -> AffinityModel:
    """Adapt an affinity model to one target from a handful of its measured ligands (few-shot).

    ``method="auto"``: the base model's choice for that many ligands in its k-shot evaluation
    (:func:`~geomol.inference.anchor_ligands.finetune_method`): fine-tuning (below), or anchoring every prediction
    on them (``"residual"``, ``"anchored"``: :mod:`geomol.inference.anchored_series`, weights unchanged).

    Every member's encoder stays as it is (a contact scorer: its hidden layers); its read-out (a contact
    scorer: its last per-atom layer and descriptor term) takes ``steps`` small Adam steps on the measured
    pK, pulled towards its shipped weights (``anchor``), and its constant offset is refitted
    (:mod:`geomol.training.finetune`). By default it takes 10 steps, and more only where an estimate from the
    measured ligands themselves (leave-pair-out within them, :mod:`geomol.training.finetune_choice`) says that a
    longer fit orders held-out pairs of them better than the model as it is by a margin; below 4 measured
    ligands it takes 10 steps unchecked. The estimate is in ``model.metrics["finetune"]["decision"]`` (its
    ``message`` in words) and on the model card.

    Args:
        receptor: the target's receptor, as for :func:`predict_affinity`.
        ligands: posed ligands, as for :func:`predict_affinity`; those named in ``measured`` are used.
        measured: measured pK by ligand name (≥ 2 usable).
        model: the base affinity model (shipped name, model directory, GET checkpoints or a loaded model;
            default: the default model, ``contact-corpus``).
        out: write the adapted model as a model directory here (card included), for
            ``predict_affinity(..., model=out)`` and ``geomol predict-affinity --model out``.
        name: the new model's name (default ``<base>-finetuned``).
        steps, lr, anchor: your own :class:`~geomol.training.finetune.FinetuneSettings` (any of them given:
            used whatever the estimate, which is still reported; unset ones take the defaults); all None:
            10 steps, more where the estimate favours it.

    Returns:
        The adapted model; ``model.metrics["finetune"]`` records the ligands, settings and the fit.
    """
    base = _affinity_model(model, "cpu")
    given = {key: value for key, value in (("steps", steps), ("lr", lr), ("anchor", anchor)) if value is not None}
    method = finetune_method(base, method, len(measured), bool(given))
    if method != "finetuned":
        return anchor_affinity(base, receptor, ligand_inputs(ligands), measured, method, out=out, name=name,
                               receptor_chains=receptor_chains, overwrite=overwrite)
    choice = FinetuneChoice(forced=FinetuneSettings(**given)) if given else FinetuneChoice()
    tuned, report = finetune_on_ligands(base, receptor, ligands, measured, choice, name=name,
                                        receptor_chains=receptor_chains)
    if out is not None:
        label = receptor.source if isinstance(receptor, Structure) else Path(receptor).name
        tuned.save(out, card=finetune_card(tuned, report, label), name=name or None, overwrite=overwrite)
    return tuned


# ---------------------------------------------------------------------- trajectory rollout
def _dynamics_model(model: ModelReference, device: str) -> DynamicsModel:
    loaded = load_model(model, device=device)
    if not isinstance(loaded, DynamicsModel):
        raise ConfigError(f"{loaded!r} is not a trajectory (dynamics) model")
    return loaded


def rollout(model: ModelReference, topology: str | PathLike, trajectory: str | PathLike | None = None, *,
            out: str | PathLike, selection: str | None = None, start: int = 0, frames: int | None = None,
            windows: int | None = None, velocity_from: str | PathLike | int | None = None,
            reference: str | PathLike | bool | None = None, reference_topology: str | PathLike | None = None,
            superpose: bool = False, plot: str | PathLike | None = None, summary: str | PathLike | None = None,
            output_frames: str = "all", include_start: bool = True, restore_bonds: bool = False, seed: int = 0,
            device: str = "cpu", progress: bool = False) -> TrajectoryRollout:
    """Roll a trained EGNO out from a frame of a molecular trajectory and write the predicted trajectory.

    Each window predicts the P frames at the model's target offsets o_1..o_P after its input
    frame; the last predicted frame and the velocity estimated from the last two seed the next
    window (``geomol.inference.dynamics.rollout``). Frames are streamed to ``out``, so memory does not grow.

    Args:
        model: a trajectory model: shipped name (``"egno-fkbp12"``), model directory, ``geomol fit``
            checkpoint, or a model from :func:`load_model`.
        topology, trajectory: files MDAnalysis reads (PSF + DCD, GRO + XTC, multi-model PDB, ...). A small-molecule
            model (``egno-md17-*``, ``egno-molecules``) also reads XYZ, SDF, MOL2 and MD17 npz files, takes their
            heavy atoms in any order (matched to its molecule by the molecular graph; another molecule is refused
            with MoleculeMismatchError) and writes them in the file's order.
        out: the predicted trajectory, any multi-frame format MDAnalysis writes (DCD, XTC, TRR,
            PDB, NetCDF, ...); coordinate-only formats get ``<stem>_topology.pdb`` beside them.
        selection: MDAnalysis selection (default: the one the model was trained on).
        start: input frame; its velocity is the model's: x[start+1] − x[start] (Å per frame) for the official
            protocols, the backward difference over the model's frame spacing for small-molecule models.
        frames: frames past the start to roll out (windows = ceil(frames / o_P)); or ``windows``.
            Neither: one window.
        velocity_from: instead of frame start+1: a structure file one frame later than the start
            (then ``trajectory`` may be omitted), or another frame number k (v = (x[k] − x[start])/(k − start)).
        reference: compare with a reference trajectory at the same frame numbers: a trajectory
            file (with ``reference_topology``, default ``topology``) or True for ``trajectory`` itself. For
            small-molecule models, the ensemble comparison with that run instead (JS divergences of bonds,
            angles and torsions with the MD's floor and a frozen structure; bonds off their MD means).
        superpose: also report the RMSD after optimal superposition.
        plot: PNG of RMSD over time and per-atom error (needs ``reference``). summary: JSON record.
        output_frames: ``"all"`` predicted frames in time order, or only window ``"ends"``.
        include_start: write the start frame first. device: torch device. progress: a progress bar.
        restore_bonds: after each window, move the atoms until every bond has its start-frame length
            again (:class:`~geomol.inference.dynamics.bond_restoring.BondRestoring`, SHAKE-like); off by default,
            and a different predictor from the model alone (the summary records it).
        seed: the random stream of a generative model (EGNOFlow): the same seed repeats the rollout.

    Returns:
        :class:`~geomol.inference.dynamics.rollout_files.TrajectoryRollout`: files written, frame numbers
        and times (ps) of the written frames, RMSD per predicted frame (with a reference), the
        chemistry of the predicted frames (``chemistry``: bond-length and angle errors against the
        start frame, broken bonds, clashes; always) and the JSON-ready summary.

    Raises:
        EmptySelectionError: the selection matches no atom.
        TrajectoryError: unreadable files; too few frames for the start state or the reference.
        ModelLoadError, ConfigError: no such model, not an MD trajectory model, bad options.
    """
    return rollout_trajectory(_dynamics_model(model, device), topology, trajectory, out=out, selection=selection,
                              start=start, frames=frames, windows=windows, velocity_from=velocity_from,
                              reference=reference, reference_topology=reference_topology, superpose=superpose,
                              plot=plot, summary=summary, output_frames=output_frames, include_start=include_start,
                              restore_bonds=restore_bonds, seed=seed, progress=progress)


def rollout_arrays(model: ModelReference, positions: Any, velocities: Any, *, frames: int | None = None,
                   windows: int | None = None, charges: Any = None, output_frames: str = "all",
                   include_start: bool = True, molecule: Any = None, seed: int = 0, device: str = "cpu",
                   progress: bool = False) -> ArrayRollout:
    """Roll a trained EGNO out from one in-memory state (N-body, Mocap, a molecule, or any MD system).

    Args:
        model: as for :func:`rollout` (``"egno-nbody"``, ``"egno-mocap-run"``, a checkpoint, ...).
        positions, velocities: [N, 3] arrays or tensors, in the units of the model's training data
            (velocity per frame for MD and Mocap, the simulator velocity for N-body).
        frames / windows: rollout length as for :func:`rollout`.
        charges: [N] particle charges (N-body) or partial charges (MD models with a charge feature).
        molecule: for models of many molecules (``egno-molecules``): the heavy atoms'
            :class:`~geomol.data.dynamics.systems.MoleculeGraph` (atomic numbers [N], bonds [B, 2]); the positions
            are then those heavy atoms, in that order, and the velocity the model's (its protocol says which).
        output_frames, include_start, seed, device, progress: as for :func:`rollout`.

    Returns:
        :class:`~geomol.inference.dynamics.rollout.ArrayRollout`: ``frame_offsets`` [F] (frames after the
        start) and ``positions`` [F, N, 3] (float64).
    """
    return _rollout_arrays(_dynamics_model(model, device), positions, velocities, frames=frames, windows=windows,
                           charges=charges, output_frames=output_frames, include_start=include_start,
                           molecule=molecule, seed=seed, progress=progress)


def evaluate_rollouts(models: ModelReference | Mapping[str, ModelReference], topology: str | PathLike,
                      trajectory: str | PathLike | None = None, *, selection: str | None = None,
                      starts: Sequence[int] | None = None, split: str | None = None, stride: int = 1,
                      horizon: int | None = None, restore_bonds: bool = False, baselines: bool = True,
                      reference: bool = True, device: str = "cpu", progress: bool = False) -> RolloutTable:
    """Trajectory models and baselines on the same windows of a held-out trajectory, in one table.

    Each window starts at a frame s with the state (x[s], x[s+1] − x[s]); every model predicts the
    frames up to ``horizon`` after it (rolled out window after window), beside the baselines "no
    motion" (x[s] kept) and "linear extrapolation" (x[s] + o·(x[s+1] − x[s])) and the reference MD
    itself (its own chemistry). See :mod:`geomol.inference.dynamics.rollout_evaluation`.

    Args:
        models: one trajectory model (name, directory, checkpoint or loaded model; the row is named
            after it) or {row name: model}, e.g. ``{"EGNO": "egno-fkbp12", "EGNN": "runs/egnn/.../best.ckpt"}``.
        topology, trajectory: the held-out trajectory (files MDAnalysis reads).
        selection: atoms (default: the first model's training selection).
        starts: start frames; default every ``stride``-th frame whose window fits, or with ``split``
            ("train" | "valid" | "test") those of that part of the MD data sets' chronological split.
        horizon: frames after each start (default: the first model's o_P, its trained horizon).
        restore_bonds: also a row per model with the bond-restoring projection after each window.
        baselines, reference: include the baseline rows and the reference MD row.
        device: torch device. progress: a progress bar over the windows.

    Returns:
        :class:`~geomol.inference.dynamics.rollout_evaluation.RolloutTable`: ``rows`` (S2S and S2T MSE in Å²,
        ``chemistry`` summary per predictor), ``offsets``, ``starts``, ``bonds``; ``to_markdown()``,
        ``to_dict()``.
    """
    return evaluate_trajectory(_named_models(models, device), topology, trajectory, selection=selection, starts=starts,
                               split=split, stride=stride, horizon=horizon, restore_bonds=restore_bonds,
                               baselines=baselines, reference=reference, progress=progress)


def _named_models(models: ModelReference | Mapping[str, ModelReference], device: str) -> dict[str, DynamicsModel]:
    """{row name: loaded trajectory model} from one model reference or a mapping of them."""
    if isinstance(models, Mapping):
        return {str(name): _dynamics_model(model, device) for name, model in models.items()}
    model = _dynamics_model(models, device)
    return {model.name or (Path(models).name if isinstance(models, (str, PathLike)) else model.architecture): model}


def evaluate_rollout_arrays(models: ModelReference | Mapping[str, ModelReference], positions: Any,
                            graph: CovalentGraph, starts: Sequence[int], *, horizon: int | None = None,
                            charges: Any = None, restore_bonds: bool = False, baselines: bool = True,
                            reference: bool = True, atom_names: Sequence[str] | None = None, source: str = "",
                            device: str = "cpu", progress: bool = False) -> RolloutTable:
    """:func:`evaluate_rollouts` on frames held in memory (e.g. an MD17 npz's ``R``).

    Args:
        models: as for :func:`evaluate_rollouts`.
        positions: [F, N, 3] frames of the held-out trajectory (Å), in the models' atom order.
        graph: their bonds: :class:`~geomol.data.chemistry.covalent_graph.CovalentGraph` (``from_bonds(bonds, elements)``,
            ``perceived(elements, positions[0])``).
        starts: start frames s of the windows (each needs frames s … s + horizon).
        charges: [N] partial charges for models with a charge feature. atom_names: [N] names, for the
            errors by kind of bond. source: the data's name, for the table.
        horizon, restore_bonds, baselines, reference, device, progress: as for :func:`evaluate_rollouts`.
    """
    return _evaluate_arrays(_named_models(models, device), positions, graph, starts, horizon=horizon, charges=charges,
                            restore_bonds=restore_bonds, baselines=baselines, reference=reference,
                            atom_names=atom_names, source=source, progress=progress)
