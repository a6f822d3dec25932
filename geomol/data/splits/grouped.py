"""Grouped data splits and a leakage check.

A *group* is anything that must not be on both sides of a split: a protein target (for
leave-one-target-out and protein-grouped K-fold), or a ligand group (alternative protonation
states, flips and poses of one compound; the same compound in two sources). Splits here work on
one group label per item and return lists of item indices; :func:`check_no_leakage` verifies
any split (from here or from a file) and raises a :class:`~geomol.errors.DatasetError` naming
what leaked.
"""
from __future__ import annotations

import random
import re
from typing import Hashable, Iterable, Iterator, Mapping, Sequence

from geomol.errors import ConfigError, DatasetError

__all__ = [
    "canonical_protein_key",
    "connected_groups",
    "random_group_split",
    "group_kfold",
    "leave_one_group_out",
    "split_by_groups",
    "check_no_leakage",
]

# Names of one protein spelled differently by different sources, after lower-casing and removing
# everything but letters and digits (so 'HIF-2alpha' -> 'hif2alpha' -> 'hif2a').
_PROTEIN_ALIASES = {
    "hif2alpha": "hif2a",  # FEP benchmark 'HIF-2alpha' = protein-ligand-benchmark 'hif2a'
    "bace": "bace1",
}


def canonical_protein_key(name: str) -> str:
    """One key per protein across sources: ``'HIF-2alpha'`` and ``'hif2a'`` → ``'hif2a'``,
    ``'cMet'`` → ``'cmet'``, ``'SYK'`` / ``'Syk'`` → ``'syk'``, ``'Factor Xa'`` → ``'factorxa'``."""
    key = re.sub(r"[^0-9a-z]", "", name.lower())
    return _PROTEIN_ALIASES.get(key, key)


def connected_groups(keys: Sequence[Iterable[Hashable]]) -> list[int]:
    """Group items that share any key, transitively (union–find).

    Args:
        keys: per item, the keys that tie it to others (e.g. ``[('series', 'lig 2'), ('dg', -9.1)]``).

    Returns:
        Per item, a group number; numbers follow the order of each group's first item.
    """
    parent = list(range(len(keys)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[Hashable, int] = {}
    for item, item_keys in enumerate(keys):
        for key in item_keys:
            other = owner.setdefault(key, item)
            a, b = root(item), root(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    numbering: dict[int, int] = {}
    return [numbering.setdefault(root(i), len(numbering)) for i in range(len(keys))]


def _members(groups: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    members: dict[Hashable, list[int]] = {}
    for index, group in enumerate(groups):
        members.setdefault(group, []).append(index)
    return members


def random_group_split(groups: Sequence[Hashable], fractions: Sequence[float] = (0.8, 0.1, 0.1), *,
                       names: Sequence[str] = ("train", "valid", "test"), seed: int = 0) -> dict[str, list[int]]:
    """Split items into parts of about the given fractions (of items), whole groups at a time.

    Groups are shuffled with ``seed`` and each is put into the part that is furthest below its
    target size, so every part gets close to its fraction even with uneven group sizes.
    """
    if len(fractions) != len(names) or any(f < 0 for f in fractions) or sum(fractions) <= 0:
        raise ConfigError(f"fractions {tuple(fractions)} do not match parts {tuple(names)}")
    members = _members(groups)
    order = list(members)
    random.Random(seed).shuffle(order)
    total = sum(fractions)
    targets = [f / total * len(groups) for f in fractions]
    parts: list[list[int]] = [[] for _ in names]
    for group in order:
        deficit = [targets[p] - len(parts[p]) if fractions[p] > 0 else float("-inf") for p in range(len(parts))]
        parts[max(range(len(parts)), key=deficit.__getitem__)].extend(members[group])
    return {name: sorted(part) for name, part in zip(names, parts)}


def group_kfold(groups: Sequence[Hashable], n_splits: int = 5, *, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """K folds of whole groups with balanced item counts: ``[(train_indices, test_indices), ...]``.

    Groups (shuffled with ``seed``, then sorted by size, largest first) go one by one into the
    currently smallest fold.
    """
    members = _members(groups)
    if not 2 <= n_splits <= len(members):
        raise ConfigError(f"n_splits={n_splits} needs 2 ≤ n_splits ≤ number of groups ({len(members)})")
    order = list(members)
    random.Random(seed).shuffle(order)
    order.sort(key=lambda g: len(members[g]), reverse=True)  # stable: ties keep the shuffled order
    folds: list[list[int]] = [[] for _ in range(n_splits)]
    for group in order:
        min(folds, key=len).extend(members[group])
    everything = set(range(len(groups)))
    return [(sorted(everything - set(fold)), sorted(fold)) for fold in folds]


def leave_one_group_out(groups: Sequence[Hashable]) -> Iterator[tuple[Hashable, list[int], list[int]]]:
    """For each group (in order of first appearance): ``(group, train_indices, test_indices)``."""
    members = _members(groups)
    for group, test in members.items():
        held = set(test)
        yield group, [i for i in range(len(groups)) if i not in held], list(test)


def split_by_groups(groups: Sequence[Hashable], held_out: Mapping[str, Iterable[Hashable]], *,
                    rest: str = "train") -> dict[str, list[int]]:
    """Named parts from explicit group lists: ``split_by_groups(proteins, {'test': ['cdk2']})``.

    Items of groups not listed go to ``rest``. A group listed in two parts raises ConfigError.
    """
    part_of: dict[Hashable, str] = {}
    for part, part_groups in held_out.items():
        for group in part_groups:
            if part_of.setdefault(group, part) != part:
                raise ConfigError(f"group {group!r} listed in parts {part_of[group]!r} and {part!r}")
    unknown = set(part_of) - set(groups)
    if unknown:
        raise ConfigError(f"groups not in the data: {sorted(map(str, unknown))}")
    parts: dict[str, list[int]] = {rest: [], **{p: [] for p in held_out}}
    for index, group in enumerate(groups):
        parts[part_of.get(group, rest)].append(index)
    return parts


def check_no_leakage(parts: Mapping[str, Sequence[int]], *group_labels: Sequence[Hashable],
                     num_items: int | None = None) -> None:
    """Raise DatasetError if a split leaks.

    Checks that no item is in two parts (or twice in one), that no group of any of
    ``group_labels`` (e.g. proteins, then ligand groups) has items in two parts, and, when
    ``num_items`` is given, that every item ``0..num_items-1`` is assigned.
    """
    seen: dict[int, str] = {}
    for part, indices in parts.items():
        for index in indices:
            if index in seen:
                raise DatasetError(f"item {index} is in {seen[index]!r} and {part!r}", "split")
            seen[index] = part
    if num_items is not None:
        missing = sorted(set(range(num_items)) - set(seen))
        if missing:
            raise DatasetError(f"{len(missing)} item(s) in no part, e.g. {missing[:5]}", "split")
    for labels in group_labels:
        owner: dict[Hashable, str] = {}
        for index, part in seen.items():
            group = labels[index]
            if owner.setdefault(group, part) != part:
                raise DatasetError(f"group {group!r} is in both {owner[group]!r} and {part!r}", "split")
