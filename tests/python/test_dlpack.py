"""DLPack round trips through tessel._C: CPU tensors in (any strides, versioned and 0.x capsules,
__dlpack__ producers), capsules out; the errors for devices that do not match."""

import pytest

import tessel
from tessel import _C
from tessel._dlpack import DLPackCapsule


def test_run_on_cpu_round_trip(torch):
    k = tessel.compile_softmax(3, 8, "f32")
    x = torch.randn(3, 8)
    (y,) = k.run_on_cpu(x)  # x passed through __dlpack__ (a versioned capsule when torch has one)
    assert isinstance(y, torch.Tensor) and y.shape == (3, 8)
    assert torch.allclose(y, torch.softmax(x, -1), atol=1e-6)
    # the same through both capsule kinds, and a strided (transposed) view
    (y0,) = k.run_on_cpu(torch.utils.dlpack.to_dlpack(x))
    assert torch.equal(y0, y)
    xt = torch.randn(8, 3).t()
    (yt,) = k.run_on_cpu(xt)
    assert torch.allclose(yt, torch.softmax(xt, -1), atol=1e-6)


def test_result_capsule_consumed_once(torch):
    cap = _C.softmax_cpu(torch.zeros(2, 4))
    wrapped = DLPackCapsule(cap)
    y = torch.from_dlpack(wrapped)
    assert torch.allclose(y, torch.full((2, 4), 0.25))
    with pytest.raises(RuntimeError, match="already handed to a DLPack consumer"):
        wrapped.__dlpack__()


def test_used_capsule_rejected(torch):
    cap = torch.utils.dlpack.to_dlpack(torch.zeros(2, 4))
    torch.utils.dlpack.from_dlpack(cap)  # consumes it
    with pytest.raises(TypeError, match="a capsule named 'used_dltensor'; expected an unconsumed DLPack capsule"):
        _C.softmax_cpu(cap)


def test_not_a_tensor():
    with pytest.raises(TypeError, match="x: expected a tensor supporting DLPack"):
        _C.softmax_cpu(42)


def test_device_mismatch_errors(torch):
    x = torch.zeros(4, 4, dtype=torch.float16)
    # CPU tensors handed to a GPU launch path, and the reverse direction's check
    with pytest.raises(ValueError, match=r"a is f16\[4, 4\] on cpu:0; Tessel's GPU kernels take CUDA tensors"):
        _C.matmul_into(x, x, x, 0)
    with pytest.raises(TypeError, match="is not a Tessel dtype"):
        _C.softmax_cpu(torch.zeros(2, 2, dtype=torch.complex64))


def test_numpy_round_trip():
    np = pytest.importorskip("numpy", reason="numpy is not installed")
    k = tessel.compile_softmax(2, 4, "f32")
    x = np.zeros((2, 4), dtype=np.float32)
    (y,) = k.run_on_cpu(x)
    assert float(y.sum()) == pytest.approx(2.0)
