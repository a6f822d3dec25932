import pytest
import torch

from geomol.nn import native
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


def _splitmix_keep(seed: int, n: int, threshold: int) -> list[bool]:
    """The compiled masks' definition in plain integers: draw i is 16-bit part i % 4 of SplitMix64 word i // 4."""
    full = (1 << 64) - 1
    keep = []
    for i in range(n):
        z = (seed + ((i >> 2) + 1) * 0x9E3779B97F4A7C15) & full
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & full
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & full
        z ^= z >> 31
        keep.append(((z >> (16 * (i & 3))) & 0x7FFF) >= threshold)
    return keep


@pytest.mark.skipif(not native.native_available(), reason="no C++ compiler: torch's random_() draws the masks")
def test_compiled_masks_follow_splitmix64_at_every_offset(monkeypatch):
    keep = torch.empty(4, dtype=torch.bool)
    native.keep_bits(keep, 0, 0x5000)  # SplitMix64's first word from state 0 is 0xE220A8397B1DCDAF
    assert keep.tolist() == [0x4DAF >= 0x5000, 0x7B1D >= 0x5000, 0x2839 >= 0x5000, 0x6220 >= 0x5000]
    for n in (1, 31, 32, 33, 100, 1000):  # the vector loop's edges: 32 draws per step
        keep = torch.empty(n, dtype=torch.bool)
        native.keep_bits(keep, 123456789, 3277)
        assert keep.tolist() == _splitmix_keep(123456789, n, 3277), n
    monkeypatch.setattr(native, "MIN_GROUPS_PER_THREAD", 1)  # ranges starting mid-vector, on three threads
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        split = torch.empty(1000, dtype=torch.bool)
        native.keep_bits(split, 123456789, 3277)
    finally:
        torch.set_num_threads(threads)
    assert split.tolist() == _splitmix_keep(123456789, 1000, 3277)


def test_masks_without_the_compiled_library_have_the_same_law(monkeypatch):
    monkeypatch.setenv(native.NATIVE_ENV, "0")
    torch.manual_seed(3)
    mask = keep_mask(torch.Size([1000, 301]), 0.1, torch.float32, torch.device("cpu"))
    assert (mask == 0).double().mean().item() == pytest.approx(0.1, abs=3e-3)
    assert mask.unique().tolist() == [0.0, pytest.approx(1 / (1 - 3277 / 32768))]
