"""The graph recipe (ComplexRecipe) and the trajectory protocol: one typed, versioned owner of how graphs are built."""
from __future__ import annotations

import pytest
import torch

from geomol.data import complex_from_structure, read_ligands, read_structure
from geomol.data.complexes.fragment import FragmentVocab
from geomol.data.complexes.pocket import DEFAULT_CUTOFF
from geomol.data.complexes.recipe import RECIPE_VERSION, ComplexRecipe
from geomol.data.dynamics.protocol import TrajectoryProtocol
from geomol.data.vocab import VOCAB
from geomol.errors import ConfigError, ModelLoadError
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "example"


@pytest.fixture(scope="module")
def ligands():
    return read_ligands(EXAMPLE / "tnks2_ligands.sdf")[:3]


def test_defaults_and_serialisation():
    recipe = ComplexRecipe()
    assert recipe.pocket_cutoff == DEFAULT_CUTOFF and not recipe.keep_hydrogens and recipe.fragments is None
    assert recipe.num_block_types == len(VOCAB)
    record = recipe.to_dict()
    assert record == {"version": RECIPE_VERSION, "pocket_cutoff": DEFAULT_CUTOFF, "keep_hydrogens": False,
                      "fragments": None}
    # records written before the version field (old checkpoints and shipped manifests) read as version 1
    old = {"pocket_cutoff": 8.0, "keep_hydrogens": True, "fragments": None}
    assert ComplexRecipe.from_dict(old) == ComplexRecipe(8.0, True)
    assert ComplexRecipe.from_dict(ComplexRecipe(8.0, True).to_dict()) == ComplexRecipe(8.0, True)
    with pytest.raises(ModelLoadError, match="version 2"):
        ComplexRecipe.from_dict({**record, "version": 2})
    with pytest.raises(ModelLoadError, match="positive"):
        ComplexRecipe.from_dict({**old, "pocket_cutoff": -1.0})
    # a record that leaves a field out is refused, never completed with defaults
    for record in ({}, None, {"pocket_cutoff": 8.0, "fragments": None}):
        with pytest.raises(ModelLoadError, match="no complete graph recipe") as raised:
            ComplexRecipe.from_dict(record, source="old.ckpt")
        assert raised.value.source == "old.ckpt"
    with pytest.raises(ModelLoadError, match="keep_hydrogens missing"):
        ComplexRecipe.from_dict({"pocket_cutoff": 8.0, "fragments": None})
    with pytest.raises(ConfigError, match="positive"):
        ComplexRecipe(pocket_cutoff=0.0)


def test_fragments_extend_the_vocabulary_and_survive_a_round_trip(ligands, tmp_path):
    vocab = FragmentVocab.learn(ligands, size=5)
    vocab.save(tmp_path / "vocab.json")
    recipe = ComplexRecipe.from_options(fragments=tmp_path / "vocab.json")
    assert recipe.fragments == vocab and recipe.num_block_types == len(VOCAB) + len(vocab)
    assert ComplexRecipe.from_dict(recipe.to_dict()) == recipe
    # datasets hand the vocabulary to worker processes as a file in the store, named by its content
    files = recipe.builder_files(tmp_path / "cache")
    assert FragmentVocab.load(files["fragments"]) == vocab and recipe.builder_files(tmp_path / "cache") == files
    assert ComplexRecipe().builder_files(tmp_path / "cache") == {}
    with pytest.raises(ConfigError, match="bond orders"):
        recipe.build_in_file(EXAMPLE / "tnks2_protein.pdb", ligand_resname="UNK")


def test_build_is_the_complex_builder_with_the_recipe_options(ligands):
    recipe = ComplexRecipe(pocket_cutoff=6.0, keep_hydrogens=True)
    receptor = recipe.read_receptor(EXAMPLE / "tnks2_protein.pdb")
    assert receptor.hydrogens_kept
    graph = recipe.build(receptor, ligands[1])
    expected = complex_from_structure(read_structure(EXAMPLE / "tnks2_protein.pdb", keep_hydrogens=True), ligands[1],
                                      pocket_cutoff=6.0, keep_hydrogens=True)
    assert graph.name == expected.name
    for key in ("X", "A", "B", "block_id", "segment"):
        assert torch.equal(getattr(graph, key), getattr(expected, key)), key
    # the processed-store keys of existing caches depend on these builder parameters: they must not change
    assert recipe.builder_params() == {"pocket_cutoff": 6.0, "keep_hydrogens": True}
    assert recipe.with_cutoff(None) is recipe and recipe.with_cutoff(9.0).pocket_cutoff == 9.0


def test_trajectory_protocol_versions():
    protocol = TrajectoryProtocol("nbody", (2, 4), num_nodes=5)
    record = protocol.to_dict()
    assert record["version"] == 2
    assert TrajectoryProtocol.from_dict({k: v for k, v in record.items() if k != "version"}) == protocol
    # a version-1 record (before velocity spans, bond lengths and hydrogens) reads with the reference velocity
    old = TrajectoryProtocol.from_dict({k: v for k, v in record.items()
                                        if k not in ("velocity_span", "velocity_direction", "bond_lengths",
                                                     "hydrogens", "molecule")} | {"version": 1})
    assert (old.velocity_span, old.velocity_direction) == (1, "forward") and old == protocol
    with pytest.raises(ModelLoadError, match="version 7"):
        TrajectoryProtocol.from_dict({**record, "version": 7})
    x, v, q = torch.randn(5, 3), torch.randn(5, 3), torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0])
    graph = protocol.state_graph(x, v, q)
    assert graph.edge_index.shape == (2, 20)
    i, j = graph.edge_index
    assert torch.equal(graph.edge_attr.view(-1), q[i] * q[j])
    with pytest.raises(ConfigError, match="6 nodes"):
        protocol.state_graph(torch.randn(6, 3), torch.randn(6, 3), torch.ones(6))
