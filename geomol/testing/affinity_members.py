"""The contract every affinity member kind keeps, run on each registered kind's example.

:class:`AffinityMemberContract` is a :class:`~geomol.testing.model_contract.ModelContract` over the
:class:`~geomol.models.affinity_member.AffinityMember` interface alone: it builds members with the kind's
:meth:`~geomol.models.affinity_member.AffinityMember.example`, feeds them ``member.inputs(complexes)`` and reads pK,
so a new kind inherits every check as soon as it registers and gives an example. Beside the model contract
(E(3) invariance of pK, independence of atom and block order, batch equal to its members one by one, a few
optimiser steps lowering the loss, an exact state_dict round trip) it checks the member contract itself:

* ``from_config(to_config())`` rebuilds the same architecture, and the weights load into it exactly;
* a configuration without any of the kind's ``recipe_keys`` is refused (how inputs are made is never guessed);
* the fine-tuning hooks: ``head(frozen(inputs))`` is the forward pass, ``finetune_start`` is an independent copy,
  ``finetune_parameters`` are its own parameters, and ``level`` is a scalar offset added to every pK;
* saved as a shipped model and loaded back (``geomol.inference``), it predicts what the member predicts.

A test module supplies real complexes (:meth:`AffinityMemberContract.complexes`) and makes one subclass per kind
(:func:`contract_classes`). Requires pytest (the ``test`` extra).
"""
from __future__ import annotations

from typing import Sequence

import pytest
import torch
import torch.nn.functional as F

from geomol.data.blocks import BlockGraph
from geomol.data.complexes.recipe import ComplexRecipe
from geomol.errors import ModelLoadError
from geomol.models.affinity_member import registered_kinds
from geomol.testing import INVARIANT, POSITION
from geomol.testing.model_contract import ModelContract

__all__ = ["AffinityMemberContract", "contract_classes", "permuted_complex", "LIGAND_FIELDS"]

LIGAND_FIELDS = ("ligand_descriptors", "ligand_morgan", "name")
"""Per-complex fields of a graph built from a ligand molecule that do not depend on atom order."""


def permuted_complex(graph: BlockGraph, generator: torch.Generator) -> tuple[BlockGraph, dict[str, torch.Tensor]]:
    """The same complex with atoms shuffled inside blocks and blocks shuffled inside segments; the ligand's chemistry
    rows (``ligand_chemistry``, one per ligand heavy atom in atom order) follow their atoms.

    Returns:
        the moved graph and, for ``"atoms"`` and ``"blocks"``, the index of each of its rows in ``graph``.
    """
    from geomol.data.chemistry.contact_features import ligand_heavy_atoms

    order = torch.cat([blocks[torch.randperm(len(blocks), generator=generator)]
                       for blocks in ((graph.segment == s).nonzero().flatten() for s in graph.segment.unique())])
    start = torch.cumsum(graph.block_len, 0) - graph.block_len
    atoms = torch.cat([start[b] + torch.randperm(int(graph.block_len[b]), generator=generator) for b in order])
    block_len = graph.block_len[order]
    moved = BlockGraph(X=graph.X[atoms], A=graph.A[atoms], atom_pos=graph.atom_pos[atoms],
                       block_id=torch.repeat_interleave(torch.arange(len(order)), block_len), B=graph.B[order],
                       block_len=block_len, segment=graph.segment[order], y=graph.y)
    for field in LIGAND_FIELDS:
        if getattr(graph, field, None) is not None:
            setattr(moved, field, getattr(graph, field))
    if getattr(graph, "ligand_chemistry", None) is not None:
        heavy = ligand_heavy_atoms(graph).nonzero().flatten()
        moved.ligand_chemistry = graph.ligand_chemistry[torch.searchsorted(heavy, atoms[ligand_heavy_atoms(moved)])]
    return moved, {"atoms": atoms, "blocks": order}


class AffinityMemberContract(ModelContract):
    """The contract of one member kind (``kind``), on the complexes a subclass supplies (see the module notes)."""

    kind: type = None
    outputs = {"pK": INVARIANT}
    train_steps, lr, loss_drop, train_dtype = 8, 1e-2, 0.7, torch.float32

    def complexes(self) -> list[BlockGraph]:
        """≥ 3 complexes of one receptor built with the default :class:`ComplexRecipe` from ligand molecules
        (so they carry the ligand's chemistry), with labels ``y``; float64 coordinates."""
        raise NotImplementedError

    # ---- the model contract through the member interface ---------------------------------------
    def make_model(self, seed):
        return self.kind.example(seed).double().eval()

    def make_graphs(self):
        return self.complexes()[:2]

    def training_graphs(self):
        graphs = [g.clone() for g in self.complexes()]
        for graph in graphs:
            graph.X = graph.X.to(self.train_dtype)
        return graphs

    def run(self, model, graphs):
        return {"pK": model(model.inputs(graphs))}

    def geometry(self, graph):
        return {"X": (graph.X, POSITION)}

    def with_geometry(self, graph, X):
        moved = graph.clone()
        moved.X = X
        return moved

    def permuted(self, graph, generator):
        return permuted_complex(graph, generator)[0], {"pK": None}

    def loss(self, model, graphs):
        pred = model(model.inputs(graphs))
        return F.mse_loss(pred, torch.cat([g.y for g in graphs]).to(pred.dtype))

    def test_outputs_depend_on_the_geometry(self, model, graphs):
        if self.kind.reads_pose:
            super().test_outputs_depend_on_the_geometry(model, graphs)
            return
        squeezed = [self.with_geometry(g, X=0.8 * g.X) for g in graphs]  # a ligand-only member ignores the pose
        with torch.no_grad():
            assert torch.equal(self.run(model, graphs)["pK"], self.run(model, squeezed)["pK"])

    def test_a_few_steps_lower_the_loss(self):
        if not any(True for _ in self.make_model(seed=0).parameters()):
            pytest.skip(f"{self.kind.kind} has no parameters: it is fitted outside torch (its level alone adapts)")
        super().test_a_few_steps_lower_the_loss()

    # ---- the member contract ---------------------------------------------------------------------
    def test_config_rebuilds_the_architecture(self, model, graphs):
        config = model.to_config()
        rebuilt = self.kind.from_config(config, source="contract").double().eval()
        assert rebuilt.to_config() == config and type(rebuilt) is self.kind
        rebuilt.load_state_dict(model.state_dict())
        with torch.no_grad():
            assert torch.equal(self.run(rebuilt, graphs)["pK"], self.run(model, graphs)["pK"])

    def test_a_config_without_its_recipe_is_refused(self, model):
        assert self.kind.recipe_keys, f"{self.kind.kind} names no recipe_keys"
        config = model.to_config()
        for key in self.kind.recipe_keys:
            with pytest.raises(ModelLoadError) as raised:
                self.kind.from_config({k: v for k, v in config.items() if k != key}, source="contract.json")
            assert raised.value.source == "contract.json"

    def test_finetuning_hooks(self, model, graphs):
        with torch.no_grad():
            inputs = model.inputs(graphs)
            pk = model(inputs)
            # the same function, summed in another order (a frozen part summed per ligand): float64 round-off
            torch.testing.assert_close(model.head(model.frozen(inputs)), pk, rtol=0, atol=1e-9)
        start = model.finetune_start().eval()
        assert start is not model and type(start) is self.kind
        own = {id(p) for p in start.parameters()}
        assert all(id(p) in own for p in start.finetune_parameters())
        level = start.level
        assert level.dim() == 0
        with torch.no_grad():
            level.add_(1.5)
            moved = start(start.inputs(graphs))
            torch.testing.assert_close(moved, pk + 1.5, rtol=0, atol=1e-9)
            assert torch.equal(model(inputs), pk), "fine-tuning a copy changed the member"

    def test_shipped_and_loaded_it_predicts_the_same(self, model, graphs, tmp_path_factory):
        from geomol.inference.affinity_model import AffinityModel
        from geomol.inference.loading import load_model

        members = [self.make_model(seed) for seed in (0, 1)]
        ensemble = AffinityModel(members, members[0].to_config(), ComplexRecipe(), name="contract")
        folder = ensemble.save(tmp_path_factory.mktemp(self.kind.kind) / "model")
        loaded = load_model(folder)
        assert loaded.architecture == self.kind.kind and loaded.arguments == members[0].to_config()
        assert loaded.recipe == ComplexRecipe()
        mean, std = loaded.predict(graphs)
        expected = torch.stack([self.run(m, graphs)["pK"] for m in members])
        torch.testing.assert_close(mean, expected.mean(0).float(), rtol=1e-6, atol=1e-5)  # float32 round-off
        torch.testing.assert_close(std, expected.std(0).float(), rtol=1e-5, atol=1e-5)


def contract_classes(base: type, kinds: Sequence[str] | None = None) -> dict[str, type]:
    """``{"Test<kind>Contract": class}``: one subclass of ``base`` (an :class:`AffinityMemberContract` that supplies
    the complexes) per registered member kind (or per name in ``kinds``), for a test module's namespace."""
    registered = registered_kinds()
    chosen = sorted(registered) if kinds is None else list(kinds)
    return {f"Test{name}Contract": type(f"Test{name}Contract", (base,), {"kind": registered[name]})
            for name in chosen}
