"""The contact scorer: a posed ligand's affinity score as a sum over its atoms' contacts.

    score = Σ_{ligand atoms a} MLP(normalised contact features of a) + w · normalised descriptors + b

The per-atom features (:mod:`geomol.data.chemistry.contact_features`) say what each ligand heavy atom touches in
the receptor; the descriptor term (:data:`~geomol.data.chemistry.ligand_features.DESCRIPTOR_NAMES`) carries
whole-molecule properties (size, rotatable bonds, logP, ...). Additive over atoms, the score ranks
the members of a congeneric series by what their differing atoms contribute, which is what the
within-series losses of :mod:`geomol.training.contact_scorer` train it for. An optional non-additive term
(``pooled``) adds an MLP of the ligand's mean atom state and descriptors. Being a function of distances and
elements only, it is invariant to rotations, reflections and translations of the complex.

The normalisation (log1p of the count columns, then means and spreads over training atoms and
ligands) and the calibration to pK (``scale`` and ``offset``, :meth:`ContactScorer.calibrate`) live in
buffers, so a ``state_dict`` is the whole model (``torch.load(weights_only=True)``). How a complex graph
becomes the per-atom rows is the scorer's :class:`~geomol.data.chemistry.contact_recipe.ContactRecipe`, part of
its configuration (:meth:`ContactScorer.to_config`), so a scorer with any featurisation can be saved, loaded and
used for prediction and fine-tuning (the :class:`~geomol.models.affinity_member.AffinityMember` contract).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np
import torch
from torch import nn

from geomol.data.chemistry.contact_features import (ATOM_CONTACT_FEATURES, CHEMISTRY_CONTACT_FEATURES, COUNT_FEATURES,
                                                    graph_ligand_bonds)
from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.data.chemistry.ligand_features import DESCRIPTOR_NAMES
from geomol.errors import ConfigError, ModelLoadError
from geomol.models.affinity_member import AffinityMember, register_member_kind, renamed_config, seeded
from geomol.nn.scatter import scatter_mean

__all__ = ["NO_CHEMISTRY", "WITH_CHEMISTRY", "ContactBatch", "FrozenContacts", "ContactScorer", "has_ligand_chemistry"]

WITH_CHEMISTRY = len(ATOM_CONTACT_FEATURES) + len(CHEMISTRY_CONTACT_FEATURES)
"""Per-atom input width of a scorer that reads the interaction roles too (``ContactRecipe(roles=True)``)."""
RENAMED = {"n_atom_features": "node_features", "n_descriptors": "descriptor_features"}
"""The scorer's hyperparameter names before one vocabulary (EGNO's ``node_features``) → now."""
NO_CHEMISTRY = ("the contact scorer needs the ligand's chemistry (its descriptors): give the ligand as SDF, MOL2 or "
                "SMILES")


def has_ligand_chemistry(graph) -> bool:
    """Whether a complex graph carries finite ``ligand_descriptors`` (built from a ligand molecule)."""
    values = getattr(graph, "ligand_descriptors", None)
    return values is not None and bool(torch.isfinite(values).all())


@dataclass
class ContactBatch:
    """The contact scorer's input for ``n_ligands`` complexes, in ``views`` views each (rigidly moved poses read
    as separate views, :attr:`~geomol.data.chemistry.contact_recipe.ContactRecipe.n_views`; scores are averaged
    over the views).

    Attributes:
        atoms: ``(N, F)`` finished contact rows of every ligand atom, view after view.
        owner: ``(N,)`` long, the row's ligand in its view plus ``view × n_ligands`` (0 … views·n_ligands − 1).
        descriptors: ``(n_ligands, D)`` ligand descriptors, or None (a scorer without the descriptor term).
        n_ligands: the complexes scored.
        bonds: ``(E, 2)`` long bonded rows of ``atoms`` (within one ligand and view), or None.
        views: views per complex.
    """

    atoms: torch.Tensor
    owner: torch.Tensor
    descriptors: torch.Tensor | None
    n_ligands: int
    bonds: torch.Tensor | None = None
    views: int = 1

    def to(self, device) -> "ContactBatch":
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return replace(self, atoms=move(self.atoms), owner=move(self.owner), descriptors=move(self.descriptors),
                       bonds=move(self.bonds))

    @classmethod
    def from_rows(cls, views: Sequence[Sequence[np.ndarray]], descriptors: torch.Tensor | None,
                  bonds: Sequence[np.ndarray] | None = None) -> "ContactBatch":
        """From ``views[v][i]``, the ``(L_i, F)`` rows of ligand ``i`` in view ``v``, and optionally each ligand's
        ``(B_i, 2)`` bonded row pairs (the same in every view: rigid moves keep the bonds)."""
        n_ligands = len(views[0])
        rows = [r for view in views for r in view]
        lengths = np.array([len(r) for r in rows])
        owner = np.repeat(np.arange(len(rows)), lengths)
        edges = None
        if bonds is not None:
            starts = np.cumsum(lengths) - lengths
            edges = torch.from_numpy(np.concatenate(
                [np.asarray(bonds[i % n_ligands], dtype=np.int64).reshape(-1, 2) + start
                 for i, start in enumerate(starts)]))
        return cls(torch.from_numpy(np.concatenate(rows)), torch.from_numpy(owner), descriptors, n_ligands, edges,
                   len(views))


class FrozenContacts(NamedTuple):
    """What fine-tuning a contact scorer keeps fixed for a batch (:meth:`ContactScorer.frozen`); rows are ligands
    view after view (``views · n_ligands``).

    Attributes:
        summed: ``(views·n_ligands, hidden)`` the per-atom MLP's last hidden layer summed over each ligand's atoms.
        count: ``(views·n_ligands,)`` each ligand's atom count (the last layer's bias is added once per atom).
        descriptors: ``(views·n_ligands, D)`` normalised ligand descriptors, or None (no descriptor term).
        pooled: ``(views·n_ligands,)`` the non-additive term, or None (none).
        views: views per ligand.
    """

    summed: torch.Tensor
    count: torch.Tensor
    descriptors: torch.Tensor | None
    pooled: torch.Tensor | None
    views: int


@register_member_kind
class ContactScorer(nn.Module, AffinityMember):
    """Per-atom MLP summed over each ligand, plus a linear ligand-descriptor term.

    Args:
        hidden: width of the per-atom MLP's two hidden layers.
        node_features: columns of the per-atom input (default: the ``recipe``'s width).
        descriptor_features: columns of the descriptor input (default :data:`DESCRIPTOR_NAMES`); 0 for none.
        pooled: width of an optional non-additive term (0: none): an MLP of the ligand's mean per-atom hidden
            state (the atom MLP's last hidden layer) and its normalised descriptors, added to the score.
        message_steps: rounds of messages along the ligand's bonds (0: none) before the per-atom read-out: each
            updates an atom's hidden state by ``h += SiLU(W [h, mean of its bonded neighbours' h])``, so an atom's
            term also reads what the atoms around it touch.
        recipe: how complex graphs become its rows (:class:`ContactRecipe`). Without one the scorer reads given
            rows only (training on precomputed rows) and cannot be saved as a model; with neither ``recipe`` nor
            ``node_features`` it is the default :class:`ContactRecipe`.
    """

    kind = "ContactScorer"
    card_name = "Contact-scorer binding-affinity model (pK)."
    needs_side_chains = True  # what ligand atoms touch is mostly side chains
    finetune_loss = "centred"
    recipe_keys = ("features",)

    def __init__(self, hidden: int = 32, node_features: int | None = None,
                 descriptor_features: int = len(DESCRIPTOR_NAMES), pooled: int = 0, message_steps: int = 0,
                 recipe: ContactRecipe | None = None):
        super().__init__()
        if node_features is None:
            recipe = recipe or ContactRecipe()
            node_features = recipe.width
        if recipe is not None and recipe.width != node_features:
            raise ConfigError(f"the contact recipe makes {recipe.width} columns, the scorer reads {node_features}")
        self.recipe = recipe
        self.atom_mlp = nn.Sequential(nn.Linear(node_features, hidden), nn.SiLU(), nn.Linear(hidden, hidden),
                                      nn.SiLU(), nn.Linear(hidden, 1))
        self.messages = nn.ModuleList(nn.Sequential(nn.Linear(2 * hidden, hidden), nn.SiLU())
                                      for _ in range(message_steps))
        self.descriptor_head = nn.Linear(descriptor_features, 1) if descriptor_features else None
        self.pooled_mlp = (nn.Sequential(nn.Linear(hidden + descriptor_features, pooled), nn.SiLU(),
                                         nn.Linear(pooled, 1))
                           if pooled else None)
        log_columns = torch.zeros(node_features, dtype=torch.bool)
        if node_features in (len(ATOM_CONTACT_FEATURES), WITH_CHEMISTRY):
            log_columns[[c for c in COUNT_FEATURES if c < node_features]] = True
        self.register_buffer("log_columns", log_columns)
        for name, width in (("atom", node_features), ("descriptor", descriptor_features)):
            self.register_buffer(f"{name}_mean", torch.zeros(width))
            self.register_buffer(f"{name}_std", torch.ones(width))
        self.register_buffer("scale", torch.ones(()))
        self.register_buffer("offset", torch.zeros(()))

    @property
    def message_steps(self) -> int:
        """Rounds of messages along the ligand's bonds (0: the atoms are scored independently)."""
        return len(self.messages)

    @property
    def reads_chemistry(self) -> bool:
        """Whether the per-atom input has the interaction-role columns."""
        return self.recipe.roles if self.recipe is not None else self.atom_mlp[0].in_features == WITH_CHEMISTRY

    # ------------------------------------------------------------------ the member contract
    @classmethod
    def from_config(cls, config: Mapping[str, Any], source=None) -> "ContactScorer":
        """A scorer from its :meth:`to_config`.

        Raises:
            ModelLoadError: bad sizes, or no contact recipe (``features``): how the rows were made is never guessed.
        """
        config = renamed_config(config, RENAMED, "ContactScorer", source)
        sizes = {key: config.get(key, 0) for key in ("hidden", "node_features", "descriptor_features", "pooled",
                                                       "message_steps")}
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in sizes.values()) \
                or not sizes["hidden"] or not sizes["node_features"]:
            raise ModelLoadError(f"a ContactScorer needs integer sizes (hidden, node_features, descriptor_features; "
                                 f"pooled, message_steps), got {dict(config)}", source=source)
        try:
            return cls(**sizes, recipe=cls._recorded_features(config, source))
        except ConfigError as exc:
            raise ModelLoadError(exc.reason, source=source) from None

    @staticmethod
    def _recorded_features(config: Mapping[str, Any], source) -> ContactRecipe:
        """The contact recipe a saved configuration records (its ``features``)."""
        if not isinstance(config.get("features"), Mapping):
            raise ModelLoadError("the contact scorer's configuration records no contact recipe (hyperparameters."
                                 "features: distance shells, interaction roles, ...): how its input rows were made "
                                 "cannot be known; rebuild the model with 'geomol train-affinity', which records it",
                                 source=source)
        return ContactRecipe.from_dict(config["features"], source)

    def to_config(self) -> dict[str, Any]:
        return {"hidden": self.atom_mlp[0].out_features, "node_features": self.atom_mlp[0].in_features,
                "descriptor_features": 0 if self.descriptor_head is None else self.descriptor_head.in_features,
                "pooled": 0 if self.pooled_mlp is None else self.pooled_mlp[0].out_features,
                "message_steps": self.message_steps,
                **({"features": self.recipe.to_dict()} if self.recipe is not None else {})}

    @classmethod
    def example(cls, seed: int = 0) -> "ContactScorer":
        """A scorer of width 8 on the contact rows with interaction roles, a pooled term and one round of messages
        along the ligand's bonds (the contract's example member)."""
        return seeded(lambda: cls(hidden=8, pooled=4, message_steps=1, recipe=ContactRecipe(roles=True)), seed).eval()

    @classmethod
    def check_recipe(cls, config: Mapping[str, Any], recipe, source=None) -> None:
        """Refuse complexes whose pocket is narrower than the contact features read."""
        cls._recorded_features(renamed_config(config, RENAMED, "ContactScorer", source), source).check_pocket(
            recipe.pocket_cutoff, source)

    def check_complex(self, graph, source=None) -> None:
        if (self.descriptor_head is not None or self.reads_chemistry) and not has_ligand_chemistry(graph):
            raise ConfigError(NO_CHEMISTRY, source=source)

    def inputs(self, graphs: Sequence) -> ContactBatch:
        """The :class:`ContactBatch` of complex graphs (receptor segment 0, ligand segment 1), featurised by the
        scorer's recipe.

        Raises:
            ConfigError: a scorer without a recipe, or a graph without the ligand chemistry it reads (naming it).
        """
        if self.recipe is None:
            raise ConfigError(f"this contact scorer ({self.atom_mlp[0].in_features} columns) has no contact recipe: "
                              "it reads given rows only")
        if not graphs:
            raise ConfigError("no complexes to score")
        views = [[] for _ in range(self.recipe.n_views)]
        descriptors, bonds = [], []
        for graph in graphs:
            self.check_complex(graph, getattr(graph, "name", None))
            ligand_bonds = graph_ligand_bonds(graph) if self.message_steps or self.recipe.bond_context else None
            for view, rows in zip(views, self.recipe.views(graph, ligand_bonds)):
                view.append(rows)
            if self.descriptor_head is not None:
                descriptors.append(graph.ligand_descriptors.reshape(-1))
            bonds.append(ligand_bonds)
        batch = ContactBatch.from_rows(views, torch.stack(descriptors).to(torch.float64) if descriptors else None,
                                       bonds if self.message_steps else None)
        return batch.to(self.offset.device)

    def finetune_parameters(self) -> list[nn.Parameter]:
        """The per-atom MLP's last layer and the descriptor term (its hidden layers stay)."""
        return [*self.atom_mlp[-1].parameters(), *(self.descriptor_head.parameters() if self.descriptor_head else ())]

    def finetune_moves(self) -> str:
        return "the per-atom MLP's hidden layers are unchanged; its last layer and the ligand-descriptor term"

    @property
    def level(self) -> torch.Tensor:
        return self.offset

    def _atom_inputs(self, atoms: torch.Tensor) -> torch.Tensor:
        return torch.where(self.log_columns, torch.log1p(atoms.clamp_min(0)), atoms)

    @torch.no_grad()
    def fit_normalisation(self, atoms: torch.Tensor, descriptors: torch.Tensor | None) -> None:
        """Set the input normalisation from training data: ``atoms`` ``(N, F)``, ``descriptors`` ``(B, D)``."""
        inputs = self._atom_inputs(atoms.to(self.atom_mean.dtype))
        self.atom_mean.copy_(inputs.mean(0))
        self.atom_std.copy_(inputs.std(0).clamp_min(1e-6))
        if self.descriptor_head is not None and descriptors is not None:
            descriptors = descriptors.to(self.descriptor_mean.dtype)
            self.descriptor_mean.copy_(descriptors.mean(0))
            self.descriptor_std.copy_(descriptors.std(0).clamp_min(1e-6))

    @torch.no_grad()
    def calibrate(self, raw: torch.Tensor, label: torch.Tensor, groups: torch.Tensor) -> None:
        """Map raw scores to pK: ``scale`` by least squares within groups, ``offset`` to the labels' mean.

        A within-series loss fixes neither the level (no protein's pK level can be known) nor, for the
        ranking loss, the spread. The scale makes differences within a series pK differences (the slope
        of centred labels on centred scores); the offset puts the mean at the training labels' mean.

        Args:
            raw: ``(n,)`` scores with the current ``scale`` 1 and ``offset`` 0; label: ``(n,)`` pK;
            groups: ``(n,)`` long series index of each item.
        """
        raw, label = raw.double(), label.double()
        count = torch.zeros(int(groups.max()) + 1, dtype=raw.dtype).index_add(0, groups, torch.ones_like(raw))
        centred = [v - (torch.zeros_like(count).index_add(0, groups, v) / count)[groups] for v in (raw, label)]
        slope = float((centred[0] * centred[1]).sum() / (centred[0] ** 2).sum().clamp_min(1e-12))
        self.scale.fill_(slope)
        self.offset.fill_(float(label.mean() - slope * raw.mean()))

    @torch.no_grad()
    def frozen(self, inputs: ContactBatch) -> "FrozenContacts":
        """What fine-tuning keeps fixed, per ligand and view: the last hidden layer summed over the ligand's atoms,
        its atom count, the normalised descriptors and the non-additive term (see :class:`FrozenContacts`)."""
        hidden, normalised, owner, n = self._hidden(inputs)
        summed = torch.zeros(n, hidden.shape[1], dtype=hidden.dtype, device=hidden.device).index_add(0, owner, hidden)
        ones = torch.ones(len(owner), dtype=hidden.dtype, device=hidden.device)
        count = torch.zeros(n, dtype=hidden.dtype, device=hidden.device).index_add(0, owner, ones)
        pooled = self._pooled(hidden, normalised, owner, n)
        return FrozenContacts(summed, count, normalised, pooled, inputs.views)

    def head(self, frozen: "FrozenContacts") -> torch.Tensor:
        """``(B,)`` pK from :meth:`frozen`: the per-atom last layer is linear, so its sum over a ligand's atoms is
        the layer applied to the summed hidden state (bias times the atom count); as :meth:`forward` otherwise."""
        last = self.atom_mlp[-1]
        score = frozen.summed @ last.weight[0] + frozen.count * last.bias[0]
        if self.descriptor_head is not None:
            score = score + self.descriptor_head(frozen.descriptors).squeeze(-1)
        if frozen.pooled is not None:
            score = score + frozen.pooled
        if frozen.views > 1:
            score = score.reshape(frozen.views, -1).mean(0)
        return self.scale * score + self.offset

    def _hidden(self, batch: ContactBatch) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, int]:
        """The per-atom last hidden layer ``(N, hidden)``, the normalised descriptors per ligand and view
        ``(views·n_ligands, D)`` (None without the descriptor term), each row's owner and ``views·n_ligands``."""
        descriptors, bonds, owner = batch.descriptors, batch.bonds, batch.owner
        if self.descriptor_head is not None and descriptors is None:
            raise ConfigError("this contact scorer has a descriptor term: pass the ligands' descriptors")
        atoms, dtype = batch.atoms, self.atom_mean.dtype
        n = batch.n_ligands * batch.views
        if descriptors is not None and batch.views > 1:
            descriptors = descriptors.repeat(batch.views, 1)
        hidden = self.atom_mlp[:-1]((self._atom_inputs(atoms.to(dtype)) - self.atom_mean) / self.atom_std)
        if self.messages:
            if bonds is None:
                raise ConfigError("this contact scorer passes messages along the ligand's bonds: pass the bonds")
            ends, others = torch.cat([bonds[:, 0], bonds[:, 1]]), torch.cat([bonds[:, 1], bonds[:, 0]])
            for step in self.messages:
                neighbours = scatter_mean(hidden[others], ends, len(hidden))
                hidden = hidden + step(torch.cat([hidden, neighbours], 1))
        normalised = None
        if self.descriptor_head is not None:
            normalised = (descriptors.to(dtype) - self.descriptor_mean) / self.descriptor_std
        return hidden, normalised, owner, n

    def _pooled(self, hidden: torch.Tensor, normalised: torch.Tensor | None, owner: torch.Tensor,
                n: int) -> torch.Tensor | None:
        """``(n,)`` the non-additive term of every ligand and view, or None without one."""
        if self.pooled_mlp is None:
            return None
        mean = scatter_mean(hidden, owner, n)
        return self.pooled_mlp(mean if normalised is None else torch.cat([mean, normalised], 1)).squeeze(-1)

    def forward(self, batch: ContactBatch) -> torch.Tensor:
        """Scores of a batch of ligands (:class:`ContactBatch`, from :meth:`inputs` or the training data).

        Returns:
            ``(B,)`` scores, the mean over the batch's views: pK once :meth:`calibrate` has run (only differences
            within one receptor's series are informative), raw training scores before.
        """
        hidden, normalised, owner, n = self._hidden(batch)
        per_atom = self.atom_mlp[-1](hidden).squeeze(-1)
        score = torch.zeros(n, dtype=per_atom.dtype, device=per_atom.device).index_add(0, owner, per_atom)
        if normalised is not None:
            score = score + self.descriptor_head(normalised).squeeze(-1)
        pooled = self._pooled(hidden, normalised, owner, n)
        if pooled is not None:
            score = score + pooled
        if batch.views > 1:
            score = score.reshape(batch.views, batch.n_ligands).mean(0)
        return self.scale * score + self.offset
