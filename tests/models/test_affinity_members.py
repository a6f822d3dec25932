"""Every registered affinity member kind keeps the member contract (:mod:`geomol.testing.affinity_members`): one
test class per kind in :data:`~geomol.models.affinity_member.MEMBER_KINDS`, made here from the kinds the loader
registers, on complexes of the bundled tankyrase-2 example. A new kind is tested as soon as it registers."""
from __future__ import annotations

from functools import lru_cache

import torch

from geomol.data.complexes.recipe import ComplexRecipe
from geomol.data.io import read_ligands
from geomol.models.affinity_member import MEMBER_KINDS
from geomol.testing.affinity_members import AffinityMemberContract, contract_classes
from tests.affinity_fixtures import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "example"


@lru_cache(maxsize=1)
def _complexes() -> tuple:
    recipe = ComplexRecipe()
    receptor = recipe.read_receptor(EXAMPLE / "tnks2_protein.pdb")
    ligands = read_ligands(EXAMPLE / "tnks2_ligands.sdf")
    graphs = tuple(recipe.build(receptor, ligands[i], y=5.5 + 0.6 * n) for n, i in enumerate((0, 3, 5)))
    for graph in graphs:
        graph.X = graph.X.double()
    return graphs


class ExampleComplexes(AffinityMemberContract):
    def complexes(self):
        return [g.clone() for g in _complexes()]


globals().update(contract_classes(ExampleComplexes))


def test_every_registered_kind_has_its_contract_class():
    assert {"GETAffinity", "ContactScorer", "LigandTrees"} <= set(MEMBER_KINDS)
    assert all(f"Test{kind}Contract" in globals() for kind in MEMBER_KINDS)


def test_examples_are_seeded_and_leave_the_global_generator_alone():
    for kind in MEMBER_KINDS.values():
        before = torch.random.get_rng_state()
        one, again, other = kind.example(0), kind.example(0), kind.example(1)
        assert torch.equal(torch.random.get_rng_state(), before)
        same = all(torch.equal(a, b) for a, b in zip(one.state_dict().values(), again.state_dict().values()))
        differs = any(not torch.equal(a, b) for a, b in zip(one.state_dict().values(), other.state_dict().values()))
        assert same and differs, kind.kind
