"""tessel.ops.matmul's hot path (a 2-D shape seen before), its decisions checked without a GPU:
the launch (_C.matmul_into) and the stream query are replaced by recorders, and Tessel's device
ordinal is set to the one CPU tensors report (-1), so that CPU tensors look like tensors on
Tessel's GPU to the hot path's checks. What the launch would compute is test_gpu.py's business."""

import pytest

import tessel
from tessel import ops


@pytest.fixture
def hot(torch, monkeypatch):
    ops._require_torch("test")
    calls = []

    def matmul_into(a, b, out, stream, ws):
        calls.append({"stream": stream, "ws": ws})

    monkeypatch.setattr(ops._C, "matmul_into", matmul_into)
    monkeypatch.setattr(ops, "_raw_stream", lambda device: 1234)
    monkeypatch.setattr(ops, "_device_ordinal", -1)  # what a CPU tensor's get_device() says
    monkeypatch.setattr(ops, "_seen_2d", {})
    return calls


def test_seen_shapes_launch_directly(torch, hot):
    a, b = torch.randn(8, 16).half(), torch.randn(16, 24).half()
    ops._seen_2d[(a.shape, b.shape, a.dtype)] = 0
    out = tessel.ops.matmul(a, b)
    assert out.shape == (8, 24) and out.dtype == torch.float16
    assert hot == [{"stream": 1234, "ws": None}]


def test_seen_shapes_get_their_scratch(torch, hot):
    a, b = torch.randn(1, 64).bfloat16(), torch.randn(64, 32).bfloat16()
    ops._seen_2d[(a.shape, b.shape, a.dtype)] = 4096
    tessel.ops.matmul(a, b)
    assert len(hot) == 1 and hot[0]["ws"] is not None  # an exported 4096-byte torch tensor


@pytest.mark.parametrize("case", ["unseen", "other_dtype", "transposed", "misaligned", "grad", "subclass",
                                  "other_device"])
def test_anything_else_takes_the_general_path(torch, hot, monkeypatch, case):
    a, b = torch.randn(16, 16).half(), torch.randn(16, 16).half()
    ops._seen_2d[(a.shape, b.shape, a.dtype)] = 0
    if case == "unseen":
        a = torch.randn(16, 8).half()
        b = torch.randn(8, 16).half()
    elif case == "other_dtype":
        b = b.bfloat16()
    elif case == "transposed":
        a = a.t()
    elif case == "misaligned":
        a = torch.randn(16 * 16 + 1).half()[1:].view(16, 16)
    elif case == "grad":
        b = b.float().requires_grad_().half()  # a non-leaf that requires grad, same shape and dtype
    elif case == "subclass":
        b = torch.nn.Parameter(b, requires_grad=False)
    elif case == "other_device":
        monkeypatch.setattr(ops, "_device_ordinal", 0)
    general = []
    monkeypatch.setattr(ops, "_matmul_impl", lambda x, y: general.append((x, y)) or "general")
    monkeypatch.setattr(ops, "_needs_dispatch", lambda torch, *t: False)
    assert tessel.ops.matmul(a, b) == "general"
    assert hot == [] and len(general) == 1
