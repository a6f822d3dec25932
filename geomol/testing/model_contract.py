"""The contract every geomol model keeps, as a test base that each model's test class subclasses (pytest needed:
the ``test`` extra). Affinity members get it through :mod:`geomol.testing.affinity_members`, one class per kind.

A subclass supplies a tiny model, a few small float64 graphs and how to read its outputs; the base
then checks, for every model alike:

* E(3) equivariance (rotations, reflections, translations; positions move, vectors rotate,
  invariants stay), with gradients on (training path) and off (inference path);
* permutation equivariance: shuffling atoms / blocks / nodes shuffles the per-row outputs the
  same way and leaves per-graph outputs alone;
* a batch of several samples gives what its members give one by one;
* a few optimiser steps on a fixed batch lower the training loss;
* a state_dict saved with ``torch.save`` and loaded with ``torch.load(weights_only=True)`` into a
  freshly initialised model gives bit-identical outputs.
"""
from __future__ import annotations

import io
from typing import Mapping, Sequence

import pytest
import torch
from torch import nn
from torch_geometric.data import Batch

from geomol.testing import INVARIANT, POSITION, Kind, assert_equivariant


class ModelContract:
    """Base of the model test classes (pytest collects the subclasses named ``Test*``).

    Subclasses define:
        outputs: name → kind (``POSITION``, ``VECTOR``, ``INVARIANT``) of each checked output.
        make_model(seed): a tiny float64 model in eval mode, initialised from ``seed``.
        make_graphs(): ≥ 2 samples' worth of float64 graphs of different sizes.
        run(model, graphs): the named outputs of a list of graphs, rows ordered graph by graph.
        geometry(graph) / with_geometry(graph, **tensors): the geometric inputs as
            name → (tensor, kind), and a copy of the graph with them replaced.
        permuted(graph, generator): the same sample reordered, and for each output the index
            ``perm`` with ``permuted_output == output[perm]`` (None for per-graph outputs).
        loss(model, graphs): the training loss of a batch (a scalar).
    Optional: graphs_per_sample (2 for pair models), train_steps, lr, loss_drop, train_dtype (of the
    model in the optimisation test; :meth:`training_graphs` must match it), atol.
    """

    outputs: Mapping[str, Kind] = {}
    graphs_per_sample = 1
    train_steps, lr, loss_drop = 20, 3e-3, 0.7  # the last loss must be < loss_drop × the first
    train_dtype = torch.float64
    atol = 1e-8

    def make_model(self, seed: int) -> nn.Module:
        raise NotImplementedError

    def make_graphs(self) -> list:
        raise NotImplementedError

    def run(self, model: nn.Module, graphs: Sequence) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def geometry(self, graph) -> dict[str, tuple[torch.Tensor, Kind]]:
        raise NotImplementedError

    def with_geometry(self, graph, **tensors):
        raise NotImplementedError

    def permuted(self, graph, generator: torch.Generator):
        raise NotImplementedError

    def loss(self, model: nn.Module, graphs: Sequence) -> torch.Tensor:
        raise NotImplementedError

    def training_graphs(self) -> list:
        """The fixed batch the optimisation test fits; by default the contract's graphs."""
        return self.make_graphs()

    # ---- the contract -------------------------------------------------------------------------

    @pytest.fixture(scope="class")
    def model(self):
        return self.make_model(seed=0)

    @pytest.fixture(scope="class")
    def graphs(self):
        return self.make_graphs()

    def _samples(self, graphs):
        k = self.graphs_per_sample
        return [list(graphs[i:i + k]) for i in range(0, len(graphs), k)]

    @pytest.mark.parametrize("grad", [False, True], ids=["inference", "autograd"])
    def test_e3_equivariance(self, model, graphs, grad):
        batch = Batch.from_data_list(graphs)  # every sample moved by the same element of E(3)
        inputs = self.geometry(batch)

        def fn(**tensors):
            with torch.set_grad_enabled(grad):
                return self.run(model, self.with_geometry(batch, **tensors).to_data_list())

        assert_equivariant(fn, inputs, self.outputs, atol=self.atol, trials=2)

    def test_outputs_depend_on_the_geometry(self, model, graphs):
        """Guards the equivariance test against a model that ignores coordinates."""
        batch = Batch.from_data_list(self._samples(graphs)[0])
        squeezed = {name: (0.8 * value if kind == POSITION else value)
                    for name, (value, kind) in self.geometry(batch).items()}
        with torch.no_grad():
            ref = self.run(model, batch.to_data_list())
            out = self.run(model, self.with_geometry(batch, **squeezed).to_data_list())
        invariant = [name for name, kind in self.outputs.items() if kind == INVARIANT]
        assert any(not torch.allclose(ref[name], out[name]) for name in invariant)

    def test_permutation(self, model, graphs):
        gen = torch.Generator().manual_seed(1)
        changed = False
        for sample in self._samples(graphs):
            moved, perms = zip(*(self.permuted(g, gen) for g in sample))
            with torch.no_grad():
                ref, out = self.run(model, sample), self.run(model, list(moved))
            for name in self.outputs:
                perm = self._joined(perms, name, sample)
                expected = ref[name] if perm is None else ref[name][perm]
                torch.testing.assert_close(out[name], expected, atol=1e-9, rtol=0, msg=name)
            name = next(iter(self.geometry(sample[0])))
            changed |= any(not torch.equal(self.geometry(g)[name][0], self.geometry(m)[name][0])
                           for g, m in zip(sample, moved))
        assert changed, "nothing was permuted"

    def _joined(self, perms, name, sample):
        """Per-graph permutations of one output joined into one index over the sample's rows."""
        if perms[0][name] is None:
            return None
        offset, joined = 0, []
        for perm in perms:
            joined.append(perm[name] + offset)
            offset += len(perm[name])
        return torch.cat(joined)

    def test_batch_equals_members_one_by_one(self, model, graphs):
        samples = self._samples(graphs)
        assert len(samples) >= 2
        with torch.no_grad():
            together = self.run(model, graphs)
            alone = [self.run(model, sample) for sample in samples]
        for name in self.outputs:
            torch.testing.assert_close(together[name], torch.cat([a[name] for a in alone]), atol=1e-10, rtol=0,
                                       msg=name)

    def test_a_few_steps_lower_the_loss(self):
        torch.manual_seed(0)
        model = self.make_model(seed=0).to(self.train_dtype).train()
        graphs = self.training_graphs()
        optimiser = torch.optim.Adam(model.parameters(), lr=self.lr)
        losses = []
        for _ in range(self.train_steps):
            loss = self.loss(model, graphs)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            losses.append(loss.item())
        assert losses[-1] < self.loss_drop * losses[0], losses

    def test_state_dict_round_trip_is_exact(self, model, graphs):
        buffer = io.BytesIO()
        torch.save(model.state_dict(), buffer)
        buffer.seek(0)
        fresh = self.make_model(seed=1)
        with torch.no_grad():
            before = self.run(fresh, graphs)
            fresh.load_state_dict(torch.load(buffer, weights_only=True))
            ref, out = self.run(model, graphs), self.run(fresh, graphs)
        assert any(not torch.equal(before[n], ref[n]) for n in self.outputs), "seeds 0 and 1 gave the same model"
        for name in self.outputs:
            assert torch.equal(out[name], ref[name]), name
