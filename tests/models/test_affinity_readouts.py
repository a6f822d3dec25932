"""The physics-shaped, size-aware and hybrid affinity read-outs: the model contract, and what each term means."""
import pytest
import torch

from geomol.errors import InputCheckError
from geomol.models.get import GETAffinity
from geomol.models.physics_readout import MAX_OVERLAP, RT_LN10
from geomol.models.readouts import HEAVY_ATOM_SCALE, ligand_heavy_atoms
from geomol.testing import INVARIANT
from tests.models.get_reference import one_thread  # noqa: F401 (autouse fixture)
from tests.models.test_get_model import TINY, GETContract, _double, _permuted, _plb

PHYSICS = "geomol.models.physics_readout.PhysicsReadout"
SIZE_AWARE = "geomol.models.readouts.SizeAwareReadout"
HYBRID = "geomol.models.readouts.HybridReadout"
SIZED_PHYSICS = "geomol.models.readouts.SizeAwarePhysicsReadout"
CHEMISTRY = ("ligand_descriptors", "ligand_morgan")


def _model(readout, seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    return GETAffinity(**TINY, readout=readout).to(dtype).eval()


class _ReadoutContract(GETContract):
    readout = PHYSICS
    outputs = {"pK": INVARIANT}
    train_steps, lr, loss_drop, train_dtype = 8, 1e-2, 0.5, torch.float32

    def make_model(self, seed):
        return _model(self.readout, seed)

    def make_graphs(self):
        return [_double(g) for g in _plb("cdk2", [0]) + _plb("tnks2", [1])]

    def training_graphs(self):
        return _plb("cdk2", [0, 1], cutoff=5.0) + _plb("eg5", [1], cutoff=5.0)

    def run(self, model, graphs):
        return {"pK": model(graphs)}

    def permuted(self, graph, generator):
        moved, _ = _permuted(graph, generator)
        for key in CHEMISTRY:
            moved[key] = graph[key]
        return moved, {"pK": None}

    def loss(self, model, graphs):
        return GETAffinity.loss(model(graphs), torch.cat([g.y for g in graphs]))


class TestPhysicsReadout(_ReadoutContract):
    readout = PHYSICS


class TestSizeAwareReadout(_ReadoutContract):
    readout = SIZE_AWARE


class TestHybridReadout(_ReadoutContract):
    readout = HYBRID


class TestSizeAwarePhysicsReadout(_ReadoutContract):
    readout = SIZED_PHYSICS


def test_size_aware_physics_adds_the_heavy_atom_trend_to_the_pair_energies(cdk2):
    torch.manual_seed(0)
    physics = _model(PHYSICS, dtype=torch.float32)
    sized = GETAffinity(**TINY, readout=SIZED_PHYSICS).eval()
    sized.load_state_dict(physics.state_dict(), strict=False)
    with torch.no_grad():
        assert torch.equal(sized(cdk2), physics(cdk2))  # the trend starts at 0
        sized.readout.size_slope.fill_(2.0)
        heavy = ligand_heavy_atoms(sized.embed(cdk2))
        assert torch.allclose(sized(cdk2), physics(cdk2) + 2.0 * heavy / HEAVY_ATOM_SCALE)


@pytest.fixture(scope="module")
def cdk2():
    return _plb("cdk2", [0, 3], cutoff=10.0)


def _with_ligand_moved(graph, shift):
    g = graph.clone()
    ligand = g.segment[g.block_id] == 1
    g.X = g.X.clone()
    g.X[ligand] += torch.tensor(shift, dtype=g.X.dtype)
    return g


def test_physics_terms_vanish_without_contacts_and_clashes_cost_a_bounded_energy(cdk2):
    model = _model(PHYSICS, dtype=torch.float32)
    readout = model.readout
    with torch.no_grad():
        true = readout.terms(model, model.embed(cdk2))
        far = readout.terms(model, model.embed([_with_ligand_moved(g, [60.0, 0.0, 0.0]) for g in cdk2]))
        clash = readout.terms(model, model.embed([_with_ligand_moved(g, [1.5, 0.0, 0.0]) for g in cdk2]))
    for name in ("vdw", "hbond", "hydrophobic", "metal"):
        assert torch.equal(far[name], torch.zeros(2)), name  # nothing within the cutoff
    assert torch.allclose(far["pK"], readout.offset.detach().expand(2))
    assert (true["vdw"] < 0).all() and (true["hydrophobic"] < 0).all()  # an expert pose has favourable contacts
    assert (clash["vdw"] > true["vdw"]).all()
    heavy = ligand_heavy_atoms(model.embed(cdk2))
    pocket_atoms = torch.tensor([int((g.segment[g.block_id] == 0).sum()) for g in cdk2], dtype=torch.float32)
    per_pair_cap = 0.03 * (MAX_OVERLAP ** 12 - 2 * MAX_OVERLAP ** 6)
    assert (clash["vdw"] <= heavy * pocket_atoms * per_pair_cap).all()  # finite: the overlap ratio is capped
    assert torch.isfinite(clash["pK"]).all()


def test_physics_rotor_penalty_divides_the_energy(cdk2):
    model = _model(PHYSICS, dtype=torch.float32)
    with torch.no_grad():
        terms = model.readout.terms(model, model.embed(cdk2))
        energy = terms["vdw"] + terms["hbond"] + terms["hydrophobic"] + terms["metal"]
        c_rot = torch.nn.functional.softplus(model.readout.raw_rotor)
        expected = -energy / (1 + c_rot * terms["rotatable_bonds"]) / RT_LN10 + model.readout.offset
    assert torch.allclose(terms["pK"], expected)
    assert terms["rotatable_bonds"].tolist() == [float(g.ligand_descriptors[0, 6]) for g in cdk2]


@pytest.mark.parametrize("readout", [PHYSICS, HYBRID])
def test_readouts_that_need_ligand_chemistry_refuse_ligands_without_bonds(cdk2, readout):
    graph = cdk2[0].clone()
    graph.ligand_descriptors = torch.full_like(graph.ligand_descriptors, float("nan"))  # a ligand from PDB records
    with pytest.raises(InputCheckError, match="SDF or MOL2"):
        _model(readout, dtype=torch.float32)([graph])


def test_size_aware_readout_starts_from_the_heavy_atom_trend(cdk2):
    model = _model(SIZE_AWARE, dtype=torch.float32)
    with torch.no_grad():
        torch.nn.init.zeros_(model.readout.residual[-1].weight)
        torch.nn.init.zeros_(model.readout.residual[-1].bias)
        pred = model(cdk2)
    heavy = torch.tensor([float(g.ligand_descriptors[0, 0]) for g in cdk2])
    assert torch.allclose(pred, model.readout.offset + model.readout.size_slope * heavy / HEAVY_ATOM_SCALE)


def test_hybrid_readout_reads_the_fingerprint(cdk2):
    model = _model(HYBRID, dtype=torch.float32)
    graph = cdk2[0].clone()
    with torch.no_grad():
        before = model([graph])
        graph.ligand_morgan = torch.zeros_like(graph.ligand_morgan)
        assert (model([graph]) - before).abs().item() > 1e-6
