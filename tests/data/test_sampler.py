"""Dynamic batch sampler: budget, oversized items, epoch reshuffle, determinism, sharding."""
from __future__ import annotations

import random

import pytest

from geomol.data.sampler import DynamicBatchSampler
from geomol.errors import ConfigError

SIZES = [random.Random(3).randint(20, 400) for _ in range(200)]


def test_budget_respected_and_every_item_once():
    sampler = DynamicBatchSampler(SIZES, max_blocks=1000, seed=1)
    batches = list(sampler)
    assert len(batches) == len(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(SIZES)))
    assert all(sum(SIZES[i] for i in b) <= 1000 for b in batches)
    # greedy packing: a batch is closed only when the next item would not fit
    flat = [i for b in batches for i in b]
    ends = [sum(SIZES[i] for i in b) for b in batches]
    nxt = [SIZES[b[0]] for b in batches[1:]]
    assert all(e + n > 1000 for e, n in zip(ends, nxt))
    assert len(flat) == len(set(flat))


def test_oversized_item_gets_its_own_batch_and_is_reported():
    sizes = [100, 5000, 200, 300, 2500]
    with pytest.warns(RuntimeWarning, match="2 item"):
        sampler = DynamicBatchSampler(sizes, max_blocks=2000, shuffle=False)
    assert sampler.oversized == [1, 4]
    assert list(sampler) == [[1], [4], [0, 2, 3]]  # oversized ones do not close the open batch


def test_epochs_reshuffle_and_are_deterministic():
    a = DynamicBatchSampler(SIZES, max_blocks=800, seed=7)
    b = DynamicBatchSampler(SIZES, max_blocks=800, seed=7)
    epoch0 = list(a)
    assert epoch0 == list(b)
    a.set_epoch(1)
    epoch1 = list(a)
    assert epoch1 != epoch0
    assert sorted(i for x in epoch1 for i in x) == list(range(len(SIZES)))
    b.set_epoch(1)
    assert list(b) == epoch1
    assert list(DynamicBatchSampler(SIZES, max_blocks=800, seed=8)) != epoch0
    unshuffled = list(DynamicBatchSampler(SIZES, max_blocks=800, shuffle=False))
    assert [i for x in unshuffled for i in x] == list(range(len(SIZES)))


@pytest.mark.parametrize("drop_last", [False, True])
def test_sharding_equal_batch_counts_and_coverage(drop_last):
    replicas = 3
    samplers = [DynamicBatchSampler(SIZES, max_blocks=700, seed=5, num_replicas=replicas, rank=r,
                                    drop_last=drop_last) for r in range(replicas)]
    for epoch in (0, 1):
        shards = []
        for s in samplers:
            s.set_epoch(epoch)
            shards.append(list(s))
        counts = {len(shard) for shard in shards}
        assert counts == {len(samplers[0])}
        total = len(DynamicBatchSampler(SIZES, max_blocks=700, seed=5))
        seen = [i for shard in shards for batch in shard for i in batch]
        if drop_last:
            assert len(seen) == len(set(seen))  # nothing repeated
            assert len(shards[0]) == total // replicas
        else:
            assert set(seen) == set(range(len(SIZES)))  # nothing lost
            assert len(shards[0]) == -(-total // replicas)
        # ranks never share a batch position's content unless padding repeated it
        firsts = [shard[0] for shard in shards]
        assert len({tuple(b) for b in firsts}) == replicas


def test_invalid_arguments():
    with pytest.raises(ConfigError):
        DynamicBatchSampler(SIZES, max_blocks=0)
    with pytest.raises(ConfigError):
        DynamicBatchSampler(SIZES, num_replicas=2, rank=2)
    assert list(DynamicBatchSampler([], max_blocks=10)) == []
