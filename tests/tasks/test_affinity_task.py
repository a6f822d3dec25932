"""Pieces of the affinity task: the within-protein ranking loss."""
import math

import pytest
import torch

from geomol.training.losses import listwise_loss, ranking_loss, series_ranking_loss, weighted_ranking_loss


def test_ranking_loss_rewards_the_right_order_within_groups_only():
    y = torch.tensor([1.0, 2.0, 3.0, 9.0])
    right = torch.tensor([0.0, 1.0, 2.0, -5.0], requires_grad=True)
    groups = ["a", "a", "a", "b"]
    good = ranking_loss(right, y, groups)
    bad = ranking_loss(-right, y, groups)
    assert good < bad
    # the lone ligand of protein b is compared with nobody: moving it changes nothing
    moved = right.detach().clone()
    moved[3] = 100.0
    assert torch.isclose(ranking_loss(moved, y, groups), good)
    good.backward()
    assert torch.isfinite(right.grad).all() and right.grad[3] == 0
    assert ranking_loss(right, y, ["a", "b", "c", "d"]) == 0  # no pair, no loss
    # invariant to a per-protein offset of the predictions
    assert torch.isclose(ranking_loss(right.detach() + 3.0, y, groups), good.detach())


def test_weighted_ranking_loss_weights_pairs_by_their_pk_difference_up_to_one():
    y = torch.tensor([5.0, 5.2, 7.0])  # pairs (5.2 > 5.0) weight 0.2; (7 > 5), (7 > 5.2) weight 1 each
    pred = torch.tensor([0.0, 1.0, 0.0])  # the close pair in the right order, both clear pairs tied
    sp = torch.nn.functional.softplus
    pair_losses = [sp(torch.tensor(-1.0)), sp(torch.tensor(0.0)), sp(torch.tensor(1.0))]  # (5.2>5), (7>5), (7>5.2)
    want = (0.2 * pair_losses[0] + pair_losses[1] + pair_losses[2]) / 2.2
    assert math.isclose(float(weighted_ranking_loss(pred, y, None)), float(want), rel_tol=1e-6)
    assert math.isclose(float(ranking_loss(pred, y, None)), float(sum(pair_losses) / 3), rel_tol=1e-6)
    assert weighted_ranking_loss(pred, y, ["a", "b", "c"]) == 0  # no pair, no loss


def test_series_ranking_loss_weighs_every_group_alike():
    sp = torch.nn.functional.softplus
    # group a: three items, three pairs, all in the right order by 1; group b: one pair, wrong way round by 2
    y = torch.tensor([1.0, 2.0, 3.0, 1.0, 2.0])
    pred = torch.tensor([0.0, 1.0, 2.0, 2.0, 0.0])
    groups = ["a", "a", "a", "b", "b"]
    a = float((2 * sp(torch.tensor(-1.0)) + sp(torch.tensor(-2.0))) / 3)
    b = float(sp(torch.tensor(2.0)))
    assert math.isclose(float(series_ranking_loss(pred, y, groups)), (a + b) / 2, rel_tol=1e-6)
    assert math.isclose(float(ranking_loss(pred, y, groups)), (3 * a + b) / 4, rel_tol=1e-6)  # pairs alike
    assert series_ranking_loss(pred, y, ["a", "b", "c", "d", "e"]) == 0  # no pair, no loss
    with pytest.raises(ValueError):
        ranking_loss(pred, y, groups, difference_cap=1.0, per_group=True)


def test_listwise_loss_is_the_cross_entropy_of_each_groups_softmaxes():
    y = torch.tensor([3.0, 2.0, 1.0, 7.0, 1.0])
    pred = torch.tensor([1.0, 2.0, 3.0, 0.0, 5.0], requires_grad=True)
    groups = ["a", "a", "a", "b", "b"]
    want = sum(-(torch.softmax(y[g], 0) * torch.log_softmax(pred.detach()[g], 0)).sum() for g in ([0, 1, 2], [3, 4]))
    value = listwise_loss(pred, y, groups)
    assert math.isclose(float(value), float(want) / 5, rel_tol=1e-6)
    # the right order scores better; offsets per group change nothing; a lone item is compared with nobody
    assert listwise_loss(-pred.detach(), y, groups) < value
    shifted = pred.detach() + torch.tensor([4.0, 4.0, 4.0, -9.0, -9.0])
    assert math.isclose(float(listwise_loss(shifted, y, groups)), float(value), rel_tol=1e-6)
    lone = listwise_loss(pred, y, ["a", "a", "a", "b", "c"])
    lone.backward()
    assert pred.grad[3] == 0 and pred.grad[4] == 0 and torch.isfinite(pred.grad).all()
    assert listwise_loss(pred, y, ["a", "b", "c", "d", "e"]) == 0  # no group of two, no loss
