"""geomol.predict_affinity / load_model / export_model on real complexes, with tiny exported models."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import geomol
from geomol.data import complex_from_pdb, complex_from_structure, read_ligands, read_structure
from geomol.units import dg_from_pk
from geomol.data.complexes.fragment import FragmentVocab
from geomol.errors import ConfigError, ModelLoadError
from geomol.inference.affinity import pocket_block_count
from geomol.testing import random_e3
from tests.affinity_fixtures import (
    PREPROCESSING,
    lightning_checkpoint,
    one_torch_thread,  # noqa: F401 (autouse fixture)
    tiny_model_dir,
    transformed_mol,
    transformed_pdb,
    write_sdf,
)
from tests.conftest import REPO, shared_path

N_LIGANDS = 3


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return tiny_model_dir(tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="module")
def model(model_dir):
    return geomol.load_model(model_dir)


@pytest.fixture(scope="module")
def cdk2(tmp_path_factory) -> tuple[Path, Path]:
    """(receptor PDB, SDF of the first ligands) of the PLB cdk2 target."""
    root = shared_path("plb", "cdk2")
    mols = read_ligands(root / "02_ligands" / "ligands.sdf")[:N_LIGANDS]
    sdf = write_sdf(mols, tmp_path_factory.mktemp("cdk2") / "ligands.sdf")
    return root / "01_protein" / "crd" / "protein.pdb", sdf


def reference_pk(model, graphs) -> list[float]:
    """Mean over members of each member's own prediction, one graph at a time."""
    with torch.no_grad():
        return [float(torch.stack([m(g) for m in model.members]).mean()) for g in graphs]


# ---------------------------------------------------------------------- models on disk
def test_export_writes_manifest_and_plain_tensor_members(model_dir, model):
    manifest = json.loads((model_dir / "manifest.json").read_text())
    assert manifest["format"] == "geomol-model" and manifest["task"] == "affinity"
    assert manifest["preprocessing"] == {"version": 1, **PREPROCESSING}  # a versioned ComplexRecipe record
    assert manifest["hyperparameters"]["hidden"] == 16 and manifest["hyperparameters"]["num_block_types"] == 150
    assert [m["file"] for m in manifest["members"]] == ["member_0.pt", "member_1.pt"]
    assert manifest["members"][1]["source"]["checkpoint"] == "tiny_1.ckpt"
    assert (model_dir / "README.md").read_text().startswith("# tiny test model")
    state = torch.load(model_dir / "member_1.pt", weights_only=True)
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    for key, value in model.members[1].state_dict().items():
        assert torch.equal(state[key], value)


def test_checkpoint_and_exported_directory_predict_the_same(model_dir, model, cdk2):
    ckpts = [model_dir.parent / f"tiny_{i}.ckpt" for i in range(2)]
    from_ckpt = geomol.predict_affinity(*cdk2, model=[str(c) for c in ckpts])
    from_dir = geomol.predict_affinity(*cdk2, model=model_dir)
    assert [r.pK for r in from_ckpt] == [r.pK for r in from_dir]
    single = geomol.predict_affinity(*cdk2, model=ckpts[0])
    assert all(math.isnan(r.pK_std) for r in single)  # one member: no spread


def test_tampered_member_and_unsafe_checkpoint_are_refused(model_dir, tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in model_dir.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    state = torch.load(copy / "member_0.pt", weights_only=True)
    state["energy_ffn.1.bias"] += 1.0
    torch.save(state, copy / "member_0.pt")
    with pytest.raises(ModelLoadError, match="SHA-256"):
        geomol.load_model(copy)
    unsafe = tmp_path / "unsafe.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"num_block_types": 150}, "payload": Path("x")}, unsafe)
    with pytest.raises(ModelLoadError, match="weights_only"):
        geomol.load_model(unsafe)


def test_model_names_resolve_through_geomol_models(model_dir, monkeypatch):
    with pytest.raises(ModelLoadError, match=r"no-such-model.*GEOMOL_MODELS"):
        geomol.load_model("no-such-model")
    monkeypatch.setenv("GEOMOL_MODELS", str(model_dir.parent))
    assert geomol.load_model("tiny").name == "tiny"
    monkeypatch.setenv("GEOMOL_MODELS", str(model_dir.parent.parent / "nowhere"))
    if (REPO / "models" / "contact-corpus" / "manifest.json").is_file():
        assert geomol.load_model("default").name == "contact-corpus"
    else:
        with pytest.raises(ModelLoadError, match=r"'default' \(alias of 'contact-corpus'\).*models"):
            geomol.load_model("default")


def test_default_alias_finds_contact_corpus(tmp_path, model_dir, monkeypatch):
    (tmp_path / "contact-corpus").mkdir()
    for f in model_dir.iterdir():
        (tmp_path / "contact-corpus" / f.name).write_bytes(f.read_bytes())
    monkeypatch.setenv("GEOMOL_MODELS", str(tmp_path))
    assert len(geomol.load_model("default").members) == 2


# ---------------------------------------------------------------------- predictions
def test_plb_predictions_match_the_model_one_by_one(model, cdk2):
    receptor, sdf = cdk2
    records = geomol.predict_affinity(receptor, sdf, model=model, batch_size=2)
    structure = read_structure(receptor)
    mols = read_ligands(sdf)
    graphs = [complex_from_structure(structure, m, pocket_cutoff=10.0) for m in mols]
    assert [r.name for r in records] == [m.GetProp("_Name") for m in mols]
    assert [r.n_pocket_blocks for r in records] == [pocket_block_count(g) for g in graphs]
    np.testing.assert_allclose([r.pK for r in records], reference_pk(model, graphs), atol=1e-5)
    for r in records:
        assert r.ok and r.pK_std > 0
        assert r.dG_kcal_mol == pytest.approx(dg_from_pk(r.pK))
        assert r.Kd_M == pytest.approx(10 ** -r.pK)


def test_bad_record_in_the_middle_is_reported_and_the_others_predicted(model, cdk2, tmp_path):
    receptor, sdf = cdk2
    records = Path(sdf).read_text().split("$$$$\n")[:N_LIGANDS]
    lines = records[1].splitlines(keepends=True)
    broken = "".join(lines[:3]) + "garbage counts line\n" + "".join(lines[4:])
    untitled_broken = "\n" + broken.split("\n", 1)[1]
    mixed = tmp_path / "mixed.sdf"
    mixed.write_text("$$$$\n".join([records[0], broken, records[2], untitled_broken]) + "$$$$\n")
    with pytest.warns(UserWarning, match="skipped 2 unreadable"):
        out = geomol.predict_affinity(receptor, mixed, model=model)
    clean = geomol.predict_affinity(receptor, sdf, model=model)
    assert [r.ok for r in out] == [True, False, True, False]
    assert out[1].name == clean[1].name and "molecule 1" in out[1].error and str(mixed) in out[1].error
    assert out[3].name == "#3"
    assert [out[0].pK, out[2].pK] == pytest.approx([clean[0].pK, clean[2].pK], abs=1e-5)
    assert math.isnan(out[1].pK) and out[1].n_pocket_blocks is None


def test_receptor_far_from_the_ligand_gives_a_clear_error(model, cdk2, tmp_path):
    receptor, sdf = cdk2
    far = transformed_pdb(receptor, tmp_path / "far.pdb", np.eye(3), np.array([80.0, 0.0, 0.0]))
    records = geomol.predict_affinity(far, sdf, model=model)
    assert not any(r.ok for r in records)
    assert all("not in a pocket" in r.error and "4.5 Å" in r.error for r in records)


def test_dna_ligand_residue_in_the_receptor_file(model):
    path = shared_path("nucleic", "dna_ligand", "1D30_complex_ref.pdb")
    (record,) = geomol.predict_affinity(path, "UNK", model=model)
    graph = complex_from_pdb(path, ligand_resname="UNK", pocket_cutoff=10.0)
    assert record.ok and record.name == "UNK"
    assert record.n_pocket_blocks == pocket_block_count(graph) > 0
    assert record.pK == pytest.approx(reference_pk(model, [graph])[0], abs=1e-5)


def test_protein_protein_chain_group_and_ready_made_graphs(model):
    from MDAnalysisTests.datafiles import CONECT  # HIV protease dimer, chains A and B

    (record,) = geomol.predict_affinity(CONECT, "chain:B", model=model, receptor_chains=["A"], pocket_cutoff=6.0)
    graph = complex_from_pdb(CONECT, receptor_chains=["A"], ligand_chains=["B"], pocket_cutoff=6.0)
    assert record.ok and record.n_pocket_blocks == pocket_block_count(graph)
    (again,) = geomol.predict_affinity(graph, model=model)
    assert again.pK == pytest.approx(record.pK, abs=1e-5)


def test_predictions_invariant_to_moving_the_whole_complex(model, cdk2, tmp_path):
    receptor, sdf = cdk2
    reference = geomol.predict_affinity(receptor, sdf, model=model)
    generator = torch.Generator().manual_seed(3)
    for reflect in (False, True):
        q, t = (x.numpy() for x in random_e3(reflect, generator=generator))
        moved_receptor = transformed_pdb(receptor, tmp_path / f"r{reflect}.pdb", q, t)
        moved_sdf = write_sdf([transformed_mol(m, q, t) for m in read_ligands(sdf)], tmp_path / f"l{reflect}.sdf")
        moved = geomol.predict_affinity(moved_receptor, moved_sdf, model=model)
        assert [r.n_pocket_blocks for r in moved] == [r.n_pocket_blocks for r in reference]
        np.testing.assert_allclose([r.pK for r in moved], [r.pK for r in reference], atol=2e-3)


def test_pocket_cutoff_comes_from_the_model_unless_given(tmp_path, cdk2):
    receptor, sdf = cdk2
    narrow = geomol.load_model(lightning_checkpoint(tmp_path / "narrow.ckpt", preprocessing={**PREPROCESSING,
                                                                                            "pocket_cutoff": 6.0}))
    default = geomol.predict_affinity(receptor, sdf, model=narrow)
    wide = geomol.predict_affinity(receptor, sdf, model=narrow, pocket_cutoff=10.0)
    structure = read_structure(receptor)
    mol = read_ligands(sdf)[0]
    assert default[0].n_pocket_blocks == pocket_block_count(complex_from_structure(structure, mol, pocket_cutoff=6.0))
    assert wide[0].n_pocket_blocks == pocket_block_count(complex_from_structure(structure, mol, pocket_cutoff=10.0))
    assert default[0].n_pocket_blocks < wide[0].n_pocket_blocks


def test_hydrogens_and_fragments_follow_the_model(tmp_path, cdk2):
    receptor, sdf = cdk2
    mols = read_ligands(sdf)
    vocab = FragmentVocab.learn(mols, size=4)
    n_types = len(vocab.block_vocab())
    prep = {"pocket_cutoff": 8.0, "keep_hydrogens": True, "fragments": vocab.to_dict()}
    fragment_model = geomol.load_model(lightning_checkpoint(tmp_path / "frag.ckpt", preprocessing=prep,
                                                            num_block_types=n_types))
    records = geomol.predict_affinity(receptor, mols, model=fragment_model)
    structure = read_structure(receptor, keep_hydrogens=True)
    graphs = [complex_from_structure(structure, m, pocket_cutoff=8.0, keep_hydrogens=True, fragments=vocab)
              for m in mols]
    assert int(graphs[0].B.max()) >= 150  # fragment block types are in use
    np.testing.assert_allclose([r.pK for r in records], reference_pk(fragment_model, graphs), atol=1e-5)
    with pytest.raises(ModelLoadError, match="block types"):
        geomol.load_model(lightning_checkpoint(tmp_path / "small.ckpt", preprocessing=prep, num_block_types=150))


def test_mixed_inputs_keep_their_order_and_bad_arguments_raise(model, cdk2):
    receptor, sdf = cdk2
    mols = read_ligands(sdf)
    records = geomol.predict_affinity(receptor, [mols[2], "missing.sdf", sdf], model=model)
    names = [m.GetProp("_Name") for m in mols]  # mols[2] again: renamed, as every repeated name is
    assert [r.name for r in records] == [names[2], "missing.sdf"] + names[:2] + [f"{names[2]} (2)"] + names[3:]
    assert "not found" in records[1].error
    assert records[0].pK == pytest.approx(records[4].pK, abs=1e-5)
    with pytest.raises(ConfigError):
        geomol.predict_affinity(receptor, None, model=model)
    with pytest.raises(ConfigError):
        geomol.predict_affinity(receptor, [42], model=model)

