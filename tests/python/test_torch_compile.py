"""torch.library custom ops with fake implementations: torch.compile(fullgraph=True) traces
models that call tessel.ops without graph breaks."""

import pytest

import tessel


def recording_backend(graphs):
    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return backend


def ops_in(gm):
    # Dynamo records the op packet (tessel.linear), AOT graphs the overload (tessel.linear.default).
    return {str(n.target).removesuffix(".default") for n in gm.graph.nodes if n.op == "call_function"}


def test_custom_ops_registered(torch):
    tessel.ops.matmul  # noqa: B018 (importing tessel.ops registers them on first torch use)
    tessel.ops._require_torch("test")
    for name in ("matmul", "linear", "softmax", "flash_attention"):
        assert hasattr(torch.ops.tessel, name)


def test_fake_implementations_on_meta(torch):
    tessel.ops._require_torch("test")
    a = torch.empty(3, 64, 32, dtype=torch.float16, device="meta")
    b = torch.empty(32, 16, dtype=torch.float16, device="meta")
    assert torch.ops.tessel.matmul(a, b).shape == (3, 64, 16)
    w = torch.empty(48, 32, dtype=torch.float16, device="meta")
    assert torch.ops.tessel.linear(a, w, None, "relu").shape == (3, 64, 48)
    x = torch.empty(4, 8, 5, dtype=torch.bfloat16, device="meta")
    y = torch.ops.tessel.softmax(x, 1)
    assert y.shape == x.shape
    q = torch.empty(2, 8, 128, 64, dtype=torch.bfloat16, device="meta")
    kv = torch.empty(2, 2, 256, 64, dtype=torch.bfloat16, device="meta")
    o, lse = torch.ops.tessel.flash_attention(q, kv, kv, True, None)
    assert o.shape == q.shape and lse.shape == (2, 8, 128) and lse.dtype == torch.float32
    assert o.stride() == (128 * 8 * 64, 64, 8 * 64, 1)  # a [B, Sq, H, D] buffer seen as BHSD
    with pytest.raises(ValueError, match="head_dim 12"):
        bad = torch.empty(1, 1, 8, 12, dtype=torch.float16, device="meta")
        torch.ops.tessel.flash_attention(bad, bad, bad, False, None)


def test_fake_tensor_mode(torch):
    from torch._subclasses.fake_tensor import FakeTensorMode

    tessel.ops._require_torch("test")
    with FakeTensorMode():
        a = torch.empty(128, 64, dtype=torch.float16)
        b = torch.empty(64, 32, dtype=torch.float16)
        c = torch.ops.tessel.matmul(a, b)
        assert c.shape == (128, 32)


def test_compile_fullgraph_mlp(torch):
    torch._dynamo.reset()
    graphs = []

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(32, 64).half()
            self.fc2 = torch.nn.Linear(64, 16).half()

        def forward(self, x):
            h = tessel.ops.linear(x, self.fc1.weight, self.fc1.bias, "relu")
            y = tessel.ops.linear(h, self.fc2.weight, self.fc2.bias)
            return tessel.ops.softmax(y, -1)

    torch.manual_seed(0)
    model = MLP()
    x = torch.randn(4, 32).half()
    with torch.no_grad():
        compiled = torch.compile(model, fullgraph=True, backend=recording_backend(graphs))
        got = compiled(x)
        ref = torch.softmax(torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(
            x.float(), model.fc1.weight.float(), model.fc1.bias.float())), model.fc2.weight.float(),
            model.fc2.bias.float()), -1)
    assert len(graphs) == 1
    assert {"tessel.linear", "tessel.softmax"} <= ops_in(graphs[0])
    assert (got.float() - ref).abs().max() < 1e-2


def test_compile_fullgraph_matmul_attention(torch):
    torch._dynamo.reset()
    graphs = []

    def f(a, b, q, k, v):
        return tessel.ops.matmul(a, b).sum() + tessel.ops.flash_attention(q, k, v, causal=True).sum()

    g = torch.Generator().manual_seed(0)
    args = (torch.randn(16, 24, generator=g).half(), torch.randn(24, 8, generator=g).half(),
            torch.randn(1, 2, 8, 16, generator=g).half(), torch.randn(1, 2, 8, 16, generator=g).half(),
            torch.randn(1, 2, 8, 16, generator=g).half())
    out = torch.compile(f, fullgraph=True, backend=recording_backend(graphs))(*args)
    assert len(graphs) == 1
    assert {"tessel.matmul", "tessel.flash_attention"} <= ops_in(graphs[0])
    assert torch.isfinite(out)


def test_requires_grad_goes_through_the_custom_op(torch):
    a = torch.randn(8, 8).half().requires_grad_()
    b = torch.randn(8, 8).half()
    c = tessel.ops.matmul(a, b)  # the custom op (no autograd formula yet)
    assert c.shape == (8, 8)
