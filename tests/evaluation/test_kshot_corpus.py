"""The k-shot corpus featurised for some sources only keeps the whole corpus's folds (real data: three plb series
and one FEP+ benchmark series), so that the default model's members still meet only clusters they never saw."""
from __future__ import annotations

import warnings

import pytest

from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.data.complexes.recipe import ComplexRecipe
from geomol.data.datasets.sources import CorpusSource
from geomol.errors import ConfigError
from geomol.evaluation.contact_cv import module_contacts
from geomol.evaluation.kshot_corpus import _SourcesFeaturised, read_kshot_corpus
from tests.conftest import REPO, shared_path

SERIES = ["plb/tnks2", "plb/pfkfb3", "plb/hif2a", "fep_benchmark/jacs_set/cdk2"]


def _ids_by_part(contacts) -> list[dict[str, set[str]]]:
    return [{part: {contacts.ids[i] for i in idx} for part, idx in fold.items()} for fold in contacts.folds]


def test_featurising_one_source_keeps_the_whole_corpus_folds(tmp_path):
    shared_path("fep_benchmark", "jacs_set")
    shared_path("plb", "tnks2")
    source = CorpusSource(ComplexRecipe(pocket_cutoff=10.0), series=SERIES, cache_dir=str(tmp_path / "cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the shared folders' own notes (unmeasured ligands left out)
        whole = module_contacts(source, ContactRecipe(), n_folds=3, valid_fraction=0.2)
        plb = module_contacts(_SourcesFeaturised(source, ["plb"]), ContactRecipe(), n_folds=3, valid_fraction=0.2)
    assert plb.ids and set(plb.ids) < set(whole.ids)
    assert {str(key).split("/", 1)[0] for key in plb.data.keys} == {"plb"}
    assert "fep_benchmark" in {str(key).split("/", 1)[0] for key in whole.data.keys}
    plb_ids = set(plb.ids)
    for part_whole, part_plb in zip(_ids_by_part(whole), _ids_by_part(plb)):
        assert {part: ids & plb_ids for part, ids in part_whole.items()} == part_plb


def test_stored_only_leaves_out_and_counts_the_items_not_yet_built(tmp_path):
    shared_path("fep_benchmark", "jacs_set")
    shared_path("plb", "tnks2")
    source = CorpusSource(ComplexRecipe(pocket_cutoff=10.0), series=SERIES, cache_dir=str(tmp_path / "cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plb = module_contacts(_SourcesFeaturised(source, ["plb"]), ContactRecipe(), n_folds=3, valid_fraction=0.2)
        both = _SourcesFeaturised(source, ["plb", "fep_benchmark"], stored_only=True)
        stored = module_contacts(both, ContactRecipe(), n_folds=3, valid_fraction=0.2)
    fep = sum(item.source == "fep_benchmark" for item in source.corpus.items)
    assert fep > 0 and both.left_out == {"fep_benchmark": fep}
    assert stored.ids == plb.ids and _ids_by_part(stored) == _ids_by_part(plb)


def test_featurising_some_sources_needs_a_corpus_source(tmp_path):
    config = tmp_path / "plb.yaml"
    config.write_text((REPO / "models" / "get-plb.yaml").read_text())
    with pytest.raises(ConfigError, match="corpus source"):
        read_kshot_corpus(config, tmp_path / "work", str(tmp_path / "cache"), sources=["plb"])
