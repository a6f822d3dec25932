"""The contact scorer keeps the contract every affinity member keeps (:mod:`geomol.testing.affinity_members`):
invariant pK under rotations, reflections and translations of the complex, independent of atom and block order, a
batch equal to its members one by one, trainable, a state_dict that is the whole model, its configuration and
fine-tuning hooks. Its input is what its contact recipe reads from the graph,
so the contract runs through :meth:`ContactScorer.inputs` on real complexes (the tankyrase-2 example)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from geomol.data import complex_from_structure, read_ligands, read_structure
from geomol.data.chemistry.contact_features import ligand_heavy_atoms
from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.models.contact_scorer import ContactScorer
from geomol.testing.affinity_members import AffinityMemberContract, permuted_complex
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "example"


def _complexes(indices, dtype=torch.float64):
    receptor = read_structure(EXAMPLE / "tnks2_protein.pdb")
    ligands = read_ligands(EXAMPLE / "tnks2_ligands.sdf")
    graphs = [complex_from_structure(receptor, ligands[i], pocket_cutoff=9.0, y=6.0 + 0.7 * i) for i in indices]
    for graph in graphs:
        graph.X = graph.X.to(dtype)
    return graphs


class ContactScorerContract(AffinityMemberContract):
    """A scorer with the role columns, messages along the ligand's bonds, a pooled term and moved pose views (the
    member contract of every kind, on a richer scorer than the kind's example)."""

    kind = ContactScorer
    recipe = ContactRecipe(roles=True, near=3.5, shell=5.5, cutoff=7.0, moves=1, pose_views="augment")
    train_steps, lr, loss_drop, train_dtype = 15, 1e-2, 0.5, torch.float64

    def make_model(self, seed):
        torch.manual_seed(seed)
        model = ContactScorer(hidden=8, pooled=4, message_steps=1, recipe=self.recipe).double()
        batch = model.inputs(_complexes([0, 1, 2]))
        model.fit_normalisation(batch.atoms.double(), batch.descriptors.double())
        return model.eval()

    def complexes(self):
        return _complexes([0, 3])

    def training_graphs(self):
        return self.make_graphs()


class TestContactScorer(ContactScorerContract):
    pass


class TestContactScorerOnElementsAlone(ContactScorerContract):
    """The plain featurisation (elements, Vina-shaped terms), one pose, no messages."""

    recipe = ContactRecipe()

    def make_model(self, seed):
        torch.manual_seed(seed)
        model = ContactScorer(hidden=8, recipe=self.recipe).double()
        return model.eval()


def test_the_permuted_graph_keeps_each_atom_with_its_roles():
    """The contract's permutation moves each ligand atom's role row with it: the moved graph's rows are the
    original rows in the new atom order (so the permutation test compares like with like)."""
    graph = _complexes([1])[0]
    moved, index = permuted_complex(graph, torch.Generator().manual_seed(3))
    rows, moved_rows = (ContactRecipe(roles=True).views(g)[0] for g in (graph, moved))
    position = torch.searchsorted(ligand_heavy_atoms(graph).nonzero().flatten(),
                                  index["atoms"][ligand_heavy_atoms(moved)]).numpy()
    assert not np.array_equal(position, np.arange(len(position)))
    np.testing.assert_allclose(moved_rows, rows[position], atol=1e-10)


@pytest.mark.parametrize("cutoff", [6.0, 9.0])
def test_the_pocket_check_follows_the_recipe(cutoff):
    from geomol.data.complexes.recipe import ComplexRecipe
    from geomol.errors import ConfigError

    config = ContactScorer(recipe=ContactRecipe(near=3.0, shell=5.0, cutoff=cutoff)).to_config()
    if cutoff > 8.0:
        with pytest.raises(ConfigError, match="smaller than the contact features"):
            ContactScorer.check_recipe(config, ComplexRecipe(pocket_cutoff=8.0))
    else:
        ContactScorer.check_recipe(config, ComplexRecipe(pocket_cutoff=8.0))
