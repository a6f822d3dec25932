"""Dynamic batch sampler: budget, oversized items, epoch reshuffle, determinism, sharding."""
from __future__ import annotations

import random

import pytest

from geomol.data.batching.sampler import DynamicBatchSampler
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


def test_fixed_batches_cover_items_and_drop_incomplete():
    from geomol.data.batching.sampler import FixedBatchSampler
    s = FixedBatchSampler(23, 5, seed=3)
    batches = list(s)
    assert [len(b) for b in batches] == [5, 5, 5, 5, 3]
    assert sorted(i for b in batches for i in b) == list(range(23))
    assert [len(b) for b in FixedBatchSampler(23, 5, drop_incomplete=True)] == [5] * 4
    assert s.sampler is s  # Lightning calls batch_sampler.sampler.set_epoch


@pytest.mark.parametrize("replicas", [1, 2])
def test_resume_mid_epoch_yields_exactly_the_unseen_batches(replicas):
    full = DynamicBatchSampler(SIZES, max_blocks=900, seed=2, num_replicas=replicas, rank=replicas - 1)
    full.set_epoch(3)
    expected = list(full)
    interrupted = DynamicBatchSampler(SIZES, max_blocks=900, seed=2, num_replicas=replicas, rank=replicas - 1)
    interrupted.set_epoch(3)
    seen = []
    for batch in interrupted:
        seen.append(batch)
        if len(seen) == 4:
            break
    state = interrupted.state_dict()
    assert state == {"epoch": 3, "batches": 4}
    resumed = DynamicBatchSampler(SIZES, max_blocks=900, seed=2, num_replicas=replicas, rank=replicas - 1)
    resumed.load_state_dict(state)
    resumed.set_epoch(3)
    rest = list(resumed)
    assert seen + rest == expected
    assert resumed.state_dict()["batches"] == len(expected)
    resumed.set_epoch(4)
    assert len(list(resumed)) == len(resumed)  # the skip applies to one pass only


def test_resumable_loader_state_round_trip():
    from geomol.data.batching.loader import ResumableLoader
    from geomol.data.batching.sampler import FixedBatchSampler
    data = list(range(10))
    loader = ResumableLoader(data, FixedBatchSampler(10, 3, seed=1), collate_fn=list)
    it = iter(loader)
    first = [next(it), next(it)]
    again = ResumableLoader(data, FixedBatchSampler(10, 3, seed=1), collate_fn=list)
    again.load_state_dict(loader.state_dict())
    assert first + list(again) == list(ResumableLoader(data, FixedBatchSampler(10, 3, seed=1), collate_fn=list))


def test_unpadded_shards_give_every_batch_exactly_once():
    shards = [list(DynamicBatchSampler(SIZES, max_blocks=700, shuffle=False, num_replicas=3, rank=r, pad=False))
              for r in range(3)]
    flat = [i for shard in shards for b in shard for i in b]
    assert sorted(flat) == list(range(len(SIZES)))
    lengths = [len(DynamicBatchSampler(SIZES, max_blocks=700, shuffle=False, num_replicas=3, rank=r, pad=False))
               for r in range(3)]
    assert lengths == [len(s) for s in shards] and max(lengths) - min(lengths) <= 1


def test_grouped_batches_never_mix_groups():
    groups = [i % 7 for i in range(len(SIZES))]
    sampler = DynamicBatchSampler(SIZES, max_blocks=900, groups=groups, seed=4)
    batches = list(sampler)
    assert all(len({groups[i] for i in b}) == 1 for b in batches)
    assert sorted(i for b in batches for i in b) == list(range(len(SIZES)))
    assert all(sum(SIZES[i] for i in b) <= 900 for b in batches)
    sampler.set_epoch(1)
    assert list(sampler) != batches  # batches are reshuffled across groups each epoch
