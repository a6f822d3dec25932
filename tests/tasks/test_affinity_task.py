"""Pieces of the affinity task: the within-protein ranking loss."""
import torch

from geomol.tasks.objectives import ranking_loss


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
