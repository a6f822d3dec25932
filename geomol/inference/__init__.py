"""Prediction with trained models, below the stable surface of :mod:`geomol.api`.

* :mod:`~geomol.inference.model_files` — the shipped-model format, name resolution, safe loading;
* :mod:`~geomol.inference.loading` — ``load_model`` / ``export_model`` for every task;
* :mod:`~geomol.inference.shipped` — :class:`ShippedModel`, the base of every loaded model (networks,
  graph recipe, metadata; building from checkpoints or a model directory, saving);
* :mod:`~geomol.inference.affinity_model` — :class:`AffinityModel`, an ensemble of GET affinity models
  with its :class:`~geomol.data.complexes.recipe.ComplexRecipe`;
* :mod:`~geomol.inference.ligand_inputs` — what ``ligands=`` accepts, expanded per ligand;
* :mod:`~geomol.inference.affinity` — the batched prediction loop and its records;
* :mod:`~geomol.inference.tables` — result, measured-value and pair tables; plots;
* :mod:`~geomol.inference.dynamics.dynamics_model` — :class:`DynamicsModel`, a trajectory model (EGNO, EGNN) with
  its data protocol (:class:`~geomol.data.dynamics.protocol.TrajectoryProtocol`);
* :mod:`~geomol.inference.dynamics.rollout`, :mod:`~geomol.inference.dynamics.rollout_files`,
  :mod:`~geomol.inference.dynamics.rollout_report` — rollouts window after window, from arrays or trajectory files,
  and their comparison with a reference.
"""
from geomol.inference.affinity import COLUMNS, AffinityPrediction, predict_inputs
from geomol.inference.affinity_model import AffinityModel
from geomol.inference.ligand_inputs import LigandInput, graph_inputs, ligand_inputs, select_ligand
from geomol.inference.dynamics.dynamics_model import DynamicsModel
from geomol.inference.loading import MODEL_CLASSES, export_model, load_model
from geomol.inference.shipped import ShippedModel

__all__ = ["AffinityModel", "AffinityPrediction", "COLUMNS", "DynamicsModel", "LigandInput", "MODEL_CLASSES",
           "ShippedModel", "export_model", "graph_inputs", "ligand_inputs", "load_model",
           "predict_inputs", "select_ligand"]
