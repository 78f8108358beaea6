"""Compile-only paths: the compiled-kernel view of the library kernels, and the tuner's
compile-only mode. NVRTC needs no GPU."""

import pytest

import tessel
from conftest import NO_GPU


def test_matmul_kernel_view():
    k = tessel.compile_matmul(256, 256, 256, "f16")
    assert "__global__" in k.source
    assert ".entry" in k.ptx
    r = k.resources
    assert r["registers"] > 0 and r["spill_store_bytes"] == 0
    assert k.info["threads"] > 0
    assert "matmul" in k.ir
    assert repr(k).startswith("<tessel.Kernel matmul")


def test_matmul_for_sm80_uses_mma_sync():
    k = tessel.compile_matmul(128, 128, 64, "bf16", arch="sm_80")
    assert k.resources["arch"] == "sm_80"
    assert "mma.sync" in k.info["instructions"]


def test_linear_softmax_attention_compile():
    lin = tessel.compile_linear(128, 256, 64, "f16", activation="relu")
    assert "__global__" in lin.source
    sm = tessel.compile_softmax(64, 1024, "bf16")
    assert sm.resources["registers"] > 0
    fa = tessel.compile_flash_attention(1, 4, 2, 128, 128, 64, "bf16", causal=True)
    # D = 64 runs the cp.async kernel capped at 128 registers (two CTAs an SM): ptxas keeps up to
    # 8 bytes a thread in local memory there (session 19); more would be a regression.
    assert fa.resources["spill_store_bytes"] <= 16
    assert fa.resources["registers"] <= 128


def test_compile_argument_errors():
    with pytest.raises(ValueError, match="M must be positive; got 0"):
        tessel.compile_matmul(0, 16, 16)
    with pytest.raises(ValueError, match="unknown dtype 'f17'; legal: f16"):
        tessel.compile_matmul(16, 16, 16, "f17")
    with pytest.raises(ValueError, match="activation: 'tanh' is not fused by the GEMM; legal: none, relu, silu"):
        tessel.compile_linear(16, 16, 16, activation="tanh")
    with pytest.raises(tessel.CompileError, match="dimension|D|head"):
        tessel.compile_flash_attention(1, 4, 4, 64, 64, 12)


def test_kernel_call_without_gpu():
    if NO_GPU is None:
        pytest.skip("a GPU is present: the no-GPU error path is not reachable")
    k = tessel.compile_softmax(4, 32, "f32")
    with pytest.raises(tessel.GPUUnavailableError, match="needs an NVIDIA GPU"):
        k.launch()


def test_tune_compile_only():
    r = tessel.tune("softmax", M=64, N=512, dtype="f16", compile_only=True, budget=2)
    assert r["compile_only"] and r["compiled"] == 2 and r["candidates"] >= 2
    assert len(r["table"]) == 2
    for row in r["table"]:
        assert row["status"] in ("not_timed", "ok", "spills", "compile_failed")
        assert "variant" in row["config"]


def test_tune_errors():
    with pytest.raises(ValueError, match="legal: gemm, softmax, attention"):
        tessel.tune("conv", M=1, compile_only=True)
    with pytest.raises(ValueError, match="the shape needs 'K'"):
        tessel.tune("gemm", M=64, N=64, compile_only=True)
    with pytest.raises(ValueError, match="legal: halving, random, exhaustive"):
        tessel.tune("gemm", M=64, N=64, K=64, strategy="fast", compile_only=True)
    if NO_GPU is not None:
        with pytest.raises(tessel.GPUUnavailableError, match="compile_only=True works without one"):
            tessel.tune("gemm", M=64, N=64, K=64)


def test_matmul_workspace_bytes():
    """The scratch tessel.ops.matmul allocates with torch: kernels::Matmul's staging buffers for
    unaligned rows (each 256-byte aligned), none for an aligned shape; compiled without a GPU."""
    up = lambda b: (b + 255) // 256 * 256
    assert tessel._C.matmul_workspace_bytes(256, 256, 256, "f16") == 0
    staged = tessel._C.matmul_workspace_bytes(4095, 4095, 4095, "bf16")  # A, B and C staged
    assert staged == up(4095 * 4096 * 2) + up(4096 * 4096 * 2) + up(4095 * 4096 * 2)
    with pytest.raises(ValueError, match="matmul_workspace_bytes: dtype 'fp8'; legal: f16, bf16"):
        tessel._C.matmul_workspace_bytes(64, 64, 64, "fp8")
    with pytest.raises(ValueError, match=r"Matmul: dtype f32 \(legal: f16, bf16\)"):
        tessel._C.matmul_workspace_bytes(64, 64, 64, "f32")
