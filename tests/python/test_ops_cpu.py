"""The ops on CPU tensors: Tessel's reference interpreter runs the kernels' programs (small
shapes: it interprets every element)."""

import pytest

import tessel


def rel(got, want):
    return float((got.float() - want.float()).norm() / want.float().norm())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_matmul_2d(torch, dtype):
    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(33, 40, generator=g).to(dt), torch.randn(40, 17, generator=g).to(dt)
    c = tessel.ops.matmul(a, b)
    assert c.shape == (33, 17) and c.dtype == dt and c.is_contiguous()
    assert rel(c, a.double() @ b.double()) < 1e-2


def test_matmul_batched_broadcast_and_transposed(torch):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(2, 1, 16, 24, generator=g).half()
    b = torch.randn(3, 24, 8, generator=g).half()
    c = tessel.ops.matmul(a, b)
    assert c.shape == (2, 3, 16, 8)
    assert rel(c, a.double() @ b.double()) < 1e-2
    bt = torch.randn(8, 24, generator=g).half().t()  # a transposed view: copied to row-major
    assert rel(tessel.ops.matmul(a[0, 0], bt), a[0, 0].double() @ bt.double()) < 1e-2


def test_linear(torch):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 5, 32, generator=g).half()
    w = torch.randn(24, 32, generator=g).half()
    bias = torch.randn(24, generator=g).half()
    ref = x.double() @ w.double().t() + bias.double()
    assert rel(tessel.ops.linear(x, w, bias), ref) < 1e-2
    assert rel(tessel.ops.linear(x, w, bias, "relu"), torch.relu(ref)) < 1e-2
    assert rel(tessel.ops.linear(x, w, None, "silu"), torch.nn.functional.silu(x.double() @ w.double().t())) < 1e-2
    assert rel(tessel.ops.linear(x, w, bias, "gelu"), torch.nn.functional.gelu(ref)) < 1e-2
    assert tessel.ops.linear(x, w).shape == (2, 5, 24)


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax(torch, dim):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(6, 40, generator=g) * 4).half()
    y = tessel.ops.softmax(x, dim)
    assert y.shape == x.shape and y.dtype == x.dtype
    assert rel(y, torch.softmax(x.double(), dim)) < 5e-3


def test_softmax_float32_inf_rows(torch):
    x = torch.tensor([[0.0, float("-inf"), 1.0], [float("-inf")] * 3])
    y = tessel.ops.softmax(x)
    ref = torch.softmax(x, -1)
    assert torch.allclose(y[0], ref[0], atol=1e-6)
    assert torch.isnan(y[1]).all() == torch.isnan(ref[1]).all()


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention(torch, causal):
    g = torch.Generator().manual_seed(4)
    q = torch.randn(1, 4, 20, 16, generator=g).half()
    k = torch.randn(1, 2, 28, 16, generator=g).half()
    v = torch.randn(1, 2, 28, 16, generator=g).half()
    o, lse = tessel.ops.flash_attention(q, k, v, causal=causal, return_lse=True)
    assert o.shape == q.shape and lse.shape == (1, 4, 20) and lse.dtype == torch.float32
    kr, vr = k.double().repeat_interleave(2, 1), v.double().repeat_interleave(2, 1)
    s = q.double() @ kr.transpose(-1, -2) / 4.0
    if causal:  # bottom-right aligned: query i sees keys j <= i + Sk - Sq
        i = torch.arange(20)[:, None]
        j = torch.arange(28)[None, :]
        s = s.masked_fill(j > i + 8, float("-inf"))
    assert rel(o, torch.softmax(s, -1) @ vr) < 1e-2
    assert rel(lse, torch.logsumexp(s, -1)) < 1e-3
