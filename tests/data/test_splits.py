"""Grouped splits: integrity (every item once), no group on two sides, leakage detection."""
from __future__ import annotations

import random

import pytest

from geomol.data.splits.grouped import (
    canonical_protein_key,
    check_no_leakage,
    connected_groups,
    group_kfold,
    leave_one_group_out,
    random_group_split,
    split_by_groups,
)
from geomol.errors import ConfigError, DatasetError

rng = random.Random(0)
PROTEINS = [rng.choice("abcdefghij") for _ in range(300)]
LIGAND_GROUPS = [f"{p}-{rng.randint(0, 20)}" for p in PROTEINS]


def test_canonical_protein_keys_match_across_sources():
    pairs = [("PTP1B", "ptp1b"), ("CDK2", "cdk2"), ("Eg5", "eg5"), ("Thrombin", "thrombin"), ("SYK", "syk"),
             ("Syk", "syk"), ("TNKS2", "tnks2"), ("PFKFB3", "pfkfb3"), ("HIF-2alpha", "hif2a"), ("cMet", "cmet")]
    for fep_name, plb_name in pairs:
        assert canonical_protein_key(fep_name) == canonical_protein_key(plb_name) == plb_name
    assert canonical_protein_key("Factor Xa") == canonical_protein_key("factor-xa")
    assert canonical_protein_key("BACE1") != canonical_protein_key("BRD4")


def test_connected_groups_is_transitive():
    keys = [["a"], ["b"], ["a", "c"], ["c", "d"], ["e"], ["d"]]
    assert connected_groups(keys) == [0, 1, 0, 0, 2, 0]
    assert connected_groups([]) == []


def test_random_group_split_integrity():
    parts = random_group_split(LIGAND_GROUPS, (0.8, 0.1, 0.1), seed=3)
    check_no_leakage(parts, LIGAND_GROUPS, num_items=len(PROTEINS))
    assert abs(len(parts["train"]) - 240) <= 12
    assert parts == random_group_split(LIGAND_GROUPS, (0.8, 0.1, 0.1), seed=3)
    assert parts != random_group_split(LIGAND_GROUPS, (0.8, 0.1, 0.1), seed=4)
    by_protein = random_group_split(PROTEINS, (0.7, 0.3), names=("train", "test"), seed=0)
    check_no_leakage(by_protein, PROTEINS, LIGAND_GROUPS, num_items=len(PROTEINS))


def test_group_kfold_and_leave_one_out():
    folds = group_kfold(PROTEINS, 5, seed=1)
    tests = [test for _, test in folds]
    assert sorted(i for t in tests for i in t) == list(range(len(PROTEINS)))  # each item tested once
    for train, test in folds:
        check_no_leakage({"train": train, "test": test}, PROTEINS, num_items=len(PROTEINS))
    sizes = [len(t) for t in tests]
    assert max(sizes) - min(sizes) <= max(PROTEINS.count(p) for p in set(PROTEINS))
    held = list(leave_one_group_out(PROTEINS))
    assert [g for g, _, _ in held] == list(dict.fromkeys(PROTEINS))
    for group, train, test in held:
        assert {PROTEINS[i] for i in test} == {group} and group not in {PROTEINS[i] for i in train}
        assert len(train) + len(test) == len(PROTEINS)
    with pytest.raises(ConfigError):
        group_kfold(PROTEINS, 11)


def test_split_by_groups():
    parts = split_by_groups(PROTEINS, {"test": ["a", "b"], "valid": ["c"]})
    check_no_leakage(parts, PROTEINS, num_items=len(PROTEINS))
    assert {PROTEINS[i] for i in parts["test"]} == {"a", "b"}
    with pytest.raises(ConfigError, match="listed in parts"):
        split_by_groups(PROTEINS, {"test": ["a"], "valid": ["a"]})
    with pytest.raises(ConfigError, match="not in the data"):
        split_by_groups(PROTEINS, {"test": ["zz"]})


def test_leakage_is_detected():
    groups = ["x", "x", "y", "z"]
    with pytest.raises(DatasetError, match="group 'x'"):
        check_no_leakage({"train": [0, 2], "test": [1, 3]}, groups)
    with pytest.raises(DatasetError, match="item 2"):
        check_no_leakage({"train": [0, 1, 2], "test": [2, 3]}, groups)
    with pytest.raises(DatasetError, match="in no part"):
        check_no_leakage({"train": [0, 1], "test": [3]}, groups, num_items=4)
    check_no_leakage({"train": [0, 1], "test": [2, 3]}, groups, num_items=4)
