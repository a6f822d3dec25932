import pytest
import torch

from geomol.nn.dropout import FastDropout, fast_dropout, keep_mask


def test_mask_drops_p_and_keeps_the_expectation():
    torch.manual_seed(0)
    mask = keep_mask(torch.Size([1000, 301]), 0.1, torch.float32, torch.device("cpu"))
    dropped = (mask == 0).double().mean().item()
    assert dropped == pytest.approx(0.1, abs=3e-3)  # 301,000 draws: σ ≈ 5e-4
    assert mask.mean().item() == pytest.approx(1.0, abs=4e-3)
    assert mask.unique().tolist() == [0.0, pytest.approx(1 / (1 - 3277 / 32768))]


def test_masks_differ_between_calls_and_follow_the_seed():
    torch.manual_seed(1)
    a = keep_mask(torch.Size([64, 64]), 0.5, torch.float64, torch.device("cpu"))
    b = keep_mask(torch.Size([64, 64]), 0.5, torch.float64, torch.device("cpu"))
    torch.manual_seed(1)
    assert not torch.equal(a, b) and torch.equal(a, keep_mask(torch.Size([64, 64]), 0.5, torch.float64,
                                                              torch.device("cpu")))


def test_dropout_gradient_is_the_mask_and_eval_is_identity():
    x = torch.randn(7, 5, 3, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(2)
    y = fast_dropout(x, 0.3, training=True)
    y.sum().backward()
    kept = y != 0
    assert torch.allclose(y[kept] / x[kept], x.grad[kept]) and (x.grad[~kept] == 0).all()
    layer = FastDropout(0.3).eval()
    assert layer(x) is x and fast_dropout(x, 0.0, True) is x
    assert (fast_dropout(x, 1.0, True) == 0).all()
    with pytest.raises(ValueError):
        FastDropout(1.5)
