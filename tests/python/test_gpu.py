"""The ops on the GPU against torch: numerics, strides, streams, the op cache, torch.compile.
SKIPPED with the reason on a machine without a GPU."""

import pytest

import tessel
from conftest import requires_gpu

pytestmark = requires_gpu


def rel(got, want):
    return float((got.double() - want.double()).norm() / want.double().norm())


@pytest.fixture(scope="module")
def cuda(torch):
    if not torch.cuda.is_available():
        pytest.skip("Tessel sees a GPU but torch does not (a CPU-only torch?)")
    return torch.device("cuda", tessel.info()["gpu"]["ordinal"])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(64, 64, 64), (1000, 1000, 1000), (17, 33, 65), (2048, 4096, 512)])
def test_matmul(torch, cuda, dtype, shape):
    M, N, K = shape
    dt = getattr(torch, dtype)
    a, b = torch.randn(M, K, device=cuda, dtype=dt), torch.randn(K, N, device=cuda, dtype=dt)
    c = tessel.ops.matmul(a, b)
    assert c.dtype == dt and c.shape == (M, N)
    assert rel(c, torch.matmul(a, b)) < 1e-2


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(1, 4096, 4096), (16, 4096, 4096), (1025, 1023, 1025), (65, 63, 9),
                                   (4095, 4095, 4095)])
def test_matmul_staged_and_skinny(torch, cuda, dtype, shape):
    """kernels::Matmul's staging (odd K or N) and the skinny decode shapes, the scratch from torch,
    on a side stream and twice (the second call reuses freed scratch: its padding must be zeroed
    again)."""
    M, N, K = shape
    dt = getattr(torch, dtype)
    s = torch.cuda.Stream(device=cuda)
    with torch.cuda.stream(s):
        for _ in range(2):
            junk = torch.full((1 << 24,), float("nan"), device=cuda, dtype=dt)  # scratch comes back dirty
            del junk
            a, b = torch.randn(M, K, device=cuda, dtype=dt), torch.randn(K, N, device=cuda, dtype=dt)
            c = tessel.ops.matmul(a, b)
            assert c.dtype == dt and c.shape == (M, N)
            assert rel(c, torch.matmul(a, b)) < 1e-2
    s.synchronize()


def test_matmul_batched_and_views(torch, cuda):
    a = torch.randn(3, 128, 64, device=cuda, dtype=torch.bfloat16)
    b = torch.randn(3, 64, 96, device=cuda, dtype=torch.bfloat16)
    assert rel(tessel.ops.matmul(a, b), a @ b) < 1e-2
    assert rel(tessel.ops.matmul(a, b[0]), a @ b[0]) < 1e-2          # folded into one GEMM
    assert rel(tessel.ops.matmul(a[0], b), a[0] @ b) < 1e-2          # broadcast a: batch stride 0
    assert rel(tessel.ops.matmul(a, b.mT.contiguous().mT), a @ b) < 1e-2  # transposed view: copied
    odd_a = torch.randn(3, 17, 33, device=cuda, dtype=torch.float16)   # entries off 16-byte boundaries
    odd_b = torch.randn(3, 33, 9, device=cuda, dtype=torch.float16)
    assert rel(tessel.ops.matmul(odd_a, odd_b), odd_a @ odd_b) < 1e-2


def test_linear(torch, cuda):
    x = torch.randn(4, 256, 512, device=cuda, dtype=torch.float16)
    w = torch.randn(384, 512, device=cuda, dtype=torch.float16) / 16
    bias = torch.randn(384, device=cuda, dtype=torch.float16)
    ref = torch.nn.functional.linear(x, w, bias)
    assert rel(tessel.ops.linear(x, w, bias), ref) < 1e-2
    assert rel(tessel.ops.linear(x, w, bias, "relu"), torch.relu(ref)) < 1e-2
    assert rel(tessel.ops.linear(x, w, None, "silu"), torch.nn.functional.silu(x @ w.t())) < 1e-2
    assert rel(tessel.ops.linear(x, w, bias, "gelu"), torch.nn.functional.gelu(ref)) < 1e-2
    assert rel(tessel.ops.linear(x, w), x @ w.t()) < 1e-2


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("shape,dim", [((4096, 1024), -1), ((8, 512, 4096), -1), ((64, 3000), 0), ((2, 7, 33), 1)])
def test_softmax(torch, cuda, dtype, shape, dim):
    x = torch.randn(*shape, device=cuda, dtype=getattr(torch, dtype)) * 4
    y = tessel.ops.softmax(x, dim)
    assert rel(y, torch.softmax(x.double(), dim)) < (1e-5 if dtype == "float32" else 5e-3)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("B,H,Hkv,S,D", [(2, 8, 8, 1024, 128), (1, 16, 4, 512, 64), (2, 4, 1, 300, 96)])
def test_flash_attention_vs_sdpa(torch, cuda, causal, B, H, Hkv, S, D):
    q = torch.randn(B, H, S, D, device=cuda, dtype=torch.bfloat16)
    k = torch.randn(B, Hkv, S, D, device=cuda, dtype=torch.bfloat16)
    v = torch.randn(B, Hkv, S, D, device=cuda, dtype=torch.bfloat16)
    o, lse = tessel.ops.flash_attention(q, k, v, causal=causal, return_lse=True)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal,
                                                           enable_gqa=H != Hkv)
    assert o.shape == q.shape and lse.shape == (B, H, S)
    assert rel(o, ref) < 2e-2


def test_flash_attention_bshd_storage(torch, cuda):
    # [B, S, H, D] storage seen in SDPA's layout: no copy, the kernel reads the strides
    qs = torch.randn(2, 256, 8, 64, device=cuda, dtype=torch.float16)
    q = qs.transpose(1, 2)
    o = tessel.ops.flash_attention(q, q, q, scale=0.1)
    ref = torch.nn.functional.scaled_dot_product_attention(q, q, q, scale=0.1)
    assert rel(o, ref) < 1e-2


def test_current_stream_is_used(torch, cuda):
    s = torch.cuda.Stream(device=cuda)
    a = torch.randn(2048, 2048, device=cuda, dtype=torch.float16)
    with torch.cuda.stream(s):
        a2 = a * 2  # on s
        c = tessel.ops.matmul(a2, a2)  # must run on s, after a2
    s.synchronize()
    assert rel(c, (a * 2) @ (a * 2)) < 1e-2


def test_op_cache(torch, cuda):
    a = torch.randn(96, 80, device=cuda, dtype=torch.float16)
    b = torch.randn(80, 112, device=cuda, dtype=torch.float16)
    tessel.ops.matmul(a, b)
    n = tessel._C.op_cache_size()
    tessel.ops.matmul(a, b)
    assert tessel._C.op_cache_size() == n


def test_device_mismatch(torch, cuda):
    with pytest.raises(ValueError, match="b is on cpu but a is on cuda"):
        tessel.ops.matmul(torch.zeros(4, 4, device=cuda, dtype=torch.float16), torch.zeros(4, 4, dtype=torch.float16))


def test_misaligned_view(torch, cuda):
    a = torch.zeros(1 + 64 * 64, device=cuda, dtype=torch.float16)[1:].view(64, 64)
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        tessel.ops.matmul(a, a)


def test_matmul_hot_path_checks_what_can_change(torch, cuda):
    """A 2-D shape seen before takes matmul's hot path; a call of the same shapes that differs in
    what the hot path checks (b's dtype, contiguity, alignment, autograd) still gets the general
    path's result or error."""
    from tessel import ops

    a = torch.randn(96, 96, device=cuda, dtype=torch.float16)
    b = torch.randn(96, 96, device=cuda, dtype=torch.float16)
    first = tessel.ops.matmul(a, b)
    assert ops._seen_2d.get((a.shape, b.shape, a.dtype)) == 0  # seen, no scratch
    again = tessel.ops.matmul(a, b)  # the hot path
    assert torch.equal(first, again) and rel(again, a @ b) < 1e-2
    assert rel(tessel.ops.matmul(a.t(), b), a.t() @ b) < 1e-2  # same shape, not contiguous
    with pytest.raises(TypeError, match="dtype"):
        tessel.ops.matmul(a, b.bfloat16())
    base = torch.randn(96 * 96 + 1, device=cuda, dtype=torch.float16)
    with pytest.raises(ValueError, match="16-byte aligned"):
        tessel.ops.matmul(base[1:].view(96, 96), b)
    w = b.clone().requires_grad_(True)
    out = tessel.ops.matmul(a, w)  # through the custom op (autograd)
    assert rel(out.detach(), a @ b) < 1e-2
    # A skinny shape whose plan splits K: the hot path allocates its scratch too.
    x = torch.randn(1, 4096, device=cuda, dtype=torch.bfloat16)
    y = torch.randn(4096, 4096, device=cuda, dtype=torch.bfloat16)
    ref = (x.double() @ y.double())
    for _ in range(3):
        got = tessel.ops.matmul(x, y)
        assert rel(got, ref) < 1e-2
    assert ops._seen_2d[(x.shape, y.shape, x.dtype)] > 0


def test_kernel_call(torch, cuda):
    k = tessel.compile_matmul(256, 128, 64, "f16")
    a = torch.randn(256, 64, device=cuda, dtype=torch.float16)
    b = torch.randn(64, 128, device=cuda, dtype=torch.float16)
    (c,) = k(a, b)
    torch.cuda.synchronize()
    assert rel(c, a @ b) < 1e-2


def test_compiled_mlp_matches_eager(torch, cuda):
    torch._dynamo.reset()

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(1024, 4096, dtype=torch.bfloat16, device=cuda)
            self.fc2 = torch.nn.Linear(4096, 1024, dtype=torch.bfloat16, device=cuda)

        def forward(self, x):
            return tessel.ops.linear(tessel.ops.linear(x, self.fc1.weight, self.fc1.bias, "relu"),
                                     self.fc2.weight, self.fc2.bias)

    model = MLP()
    x = torch.randn(512, 1024, device=cuda, dtype=torch.bfloat16)
    with torch.no_grad():
        got = torch.compile(model, fullgraph=True)(x)
        ref = model.fc2(torch.relu(model.fc1(x)))
    assert (got.float() - ref.float()).abs().max() / ref.float().abs().max() < 1e-2


def test_tune_on_gpu(torch, cuda):
    r = tessel.tune("softmax", M=1024, N=1024, dtype="f16", strategy="random", budget=4, repeats=3,
                    use_cache=False)
    assert r["found"] and r["ms"] > 0
    assert isinstance(r["kernel_object"], tessel.Kernel)
    assert any(row["status"] == "ok" for row in r["table"])
