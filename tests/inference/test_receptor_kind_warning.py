"""A model never trained on a kind of receptor says so: every prediction on an RNA pocket by a protein-only model
carries the ``receptor_kind_unseen`` warning; a model that saw RNA, or a protein pocket, does not."""
from __future__ import annotations

import dataclasses

import geomol
from geomol.data.io import read_ligands
from geomol.inference.domain import ApplicabilityDomain
from tests.affinity_fixtures import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.conftest import REPO, shared_path


def _codes(records) -> list[set[str]]:
    return [{f.code for f in r.findings} for r in records]


def test_protein_model_on_rna_warns_and_on_protein_does_not():
    folder = shared_path("nucleic_affinity", "3E5C")  # SAM bound to a riboswitch
    model = geomol.load_model("get-plb")
    assert model.domain.receptor_kinds == ("protein",)
    records = geomol.predict_affinity(folder / "receptor.pdb", folder / "ligand.sdf", model=model)
    assert records[0].ok and "receptor_kind_unseen" in _codes(records)[0]
    assert any("the pocket is RNA" in w and "protein pockets only" in w for w in records[0].warnings)
    example = REPO / "data" / "example"
    protein = geomol.predict_affinity(example / "tnks2_protein.pdb", read_ligands(example / "tnks2_ligands.sdf")[:2],
                                      model=model)
    assert all("receptor_kind_unseen" not in codes for codes in _codes(protein))


def test_a_model_that_saw_nucleic_acids_does_not_warn():
    folder = shared_path("nucleic_affinity", "454D")  # a drug bound to a DNA duplex
    model = geomol.load_model("get-plb")
    model.domain = dataclasses.replace(model.domain, receptor_kinds=("DNA", "RNA"))
    records = geomol.predict_affinity(folder / "receptor.pdb", folder / "ligand.sdf", model=model)
    assert records[0].ok and "receptor_kind_unseen" not in _codes(records)[0]
    assert ApplicabilityDomain.from_dict(model.domain.to_dict()).receptor_kinds == ("DNA", "RNA")
    old_record = {k: v for k, v in model.domain.to_dict().items() if k != "receptor_kinds"}
    assert ApplicabilityDomain.from_dict(old_record).receptor_kinds == ("protein",)  # exported before kinds existed
