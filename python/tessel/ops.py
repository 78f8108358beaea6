"""Tessel's kernels on torch tensors.

Every op takes torch tensors, checks them (device, dtype, shape, strides: a ``ValueError`` or
``TypeError`` naming the argument and what is legal), allocates its outputs with torch (the
caching allocator) and launches Tessel's kernel on torch's current CUDA stream. Inputs reach the
kernels zero-copy through DLPack capsules, except where a docstring says an op copies. CPU
tensors run on Tessel's reference interpreter (slow: for tests and small shapes).

The ops are registered as torch custom ops (``torch.ops.tessel.matmul``, ``.linear``,
``.softmax``, ``.flash_attention``) with fake implementations, so ``torch.compile(fullgraph=True)``
traces them without graph breaks. In eager mode, ``tessel.ops.*`` calls the implementation
directly (the dispatcher's own overhead skipped) unless an input requires grad — then it goes
through the custom op, which has no autograd formula yet: backward raises.

Kernels are compiled once per shape (Tessel has no symbolic shapes yet: every new (shape, dtype)
is one NVRTC compile, ~0.3 s, then a map lookup; jit()'s disk cache keeps them across processes).
"""

from __future__ import annotations

import math

from . import _C

_torch = None
_Tensor = None  # torch.Tensor, once torch is imported
_export = None
_raw_stream = None
_device_ordinal = None
_is_compiling = None
_grad_enabled = None


def _require_torch(what: str):
    global _torch, _export, _raw_stream
    if _torch is not None:
        return _torch
    try:
        import torch
    except ImportError as e:
        raise ImportError(
            f"{what} takes torch tensors, and torch is not installed (pip install torch). "
            "Without torch, tessel compiles kernels (tessel.compile_matmul(...).source) and runs "
            "Kernel.run_on_cpu on any DLPack tensor (numpy arrays too)."
        ) from e
    from ._dlpack import torch_exporter

    _export = torch_exporter()
    global _GEMM_SET, _SOFTMAX_SET
    _GEMM_SET = frozenset(_dtypes(torch, _GEMM_DTYPES))
    _SOFTMAX_SET = frozenset(_dtypes(torch, _SOFTMAX_DTYPES))
    getter = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    _raw_stream = getter if getter is not None else (lambda i: torch.cuda.current_stream(i).cuda_stream)
    global _is_compiling, _grad_enabled, _Tensor
    _is_compiling = torch.compiler.is_compiling
    _grad_enabled = torch.is_grad_enabled
    _Tensor = torch.Tensor
    _torch = torch
    from . import _torch_ops  # noqa: F401  (registers torch.ops.tessel.*)

    return torch


def _dtypes(torch, names):
    return {getattr(torch, n) for n in names}


_GEMM_DTYPES = ("float16", "bfloat16")
_GEMM_SET = frozenset()  # the torch dtypes, once torch is imported
_SOFTMAX_SET = frozenset()
_SOFTMAX_DTYPES = ("float16", "bfloat16", "float32")
_ACTIVATIONS = (None, "relu", "silu", "gelu")


def _check_tensor(torch, t, name: str, op: str):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a torch.Tensor; got {type(t).__name__}")
    if t.device.type not in ("cuda", "cpu", "meta"):
        raise ValueError(f"{op}: {name} is on {t.device}; legal: a CUDA tensor (or a CPU tensor for the "
                         "interpreter)")


def _check_dtype(torch, t, name: str, op: str, legal):
    if t.dtype not in _dtypes(torch, legal):
        raise TypeError(f"{op}: {name} has dtype {t.dtype}; legal: " + ", ".join("torch." + n for n in legal))


def _check_same(torch, op: str, first: str, t0, *rest):
    for name, t in rest:
        if t.device != t0.device:
            raise ValueError(f"{op}: {name} is on {t.device} but {first} is on {t0.device}; all tensors "
                             "must be on one device")
        if t.dtype != t0.dtype:
            raise TypeError(f"{op}: {name} has dtype {t.dtype} but {first} has {t0.dtype}; they must match")


def _needs_dispatch(torch, *tensors) -> bool:
    if _is_compiling():
        return True
    if _grad_enabled():
        for t in tensors:
            if getattr(t, "requires_grad", False):
                return True
    return False


def _stream_and_check_device(t, op: str) -> int:
    global _device_ordinal
    if _device_ordinal is None:
        if not _C.gpu_available():
            raise _C.GPUUnavailableError(
                f"{op}: the tensors are on {t.device}, but Tessel sees no GPU: {_C.gpu_unavailable_reason()}")
        _device_ordinal = _C.device_ordinal()
    index = t.get_device()
    if index != _device_ordinal:
        raise ValueError(f"{op}: the tensors are on {t.device}, but Tessel runs on cuda:{_device_ordinal} "
                         "(set TESSEL_DEVICE to choose its GPU)")
    return _raw_stream(_device_ordinal)


def _aligned(torch, t, name: str, op: str):
    if t.is_cuda and t.data_ptr() % 16 != 0:
        raise ValueError(f"{op}: {name} starts at an address that is not 16-byte aligned (a view with an "
                         f"offset of {t.storage_offset()} elements?); Tessel's vectorized loads need 16-byte "
                         f"aligned tensors: pass {name}.clone()")


def _row_major_2d(t):
    """t as a row-major 2-D tensor: itself when it is one, else a contiguous copy (a transposed view
    is copied: the GEMM and softmax kernels read row-major tiles)."""
    if t.is_contiguous():
        return t
    s0, s1 = t.stride()
    r, c = t.shape
    if (s1 == 1 or c == 1) and (s0 == c or r == 1):
        return t
    return t.contiguous()


# ---- matmul ------------------------------------------------------------------------------------

def _matmul_shape(torch, a, b, op="tessel.ops.matmul"):
    # Cheap checks first (attribute reads, ~1 us); torch.broadcast_shapes (~8 us) only for batches
    # that differ.
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.dtype not in _GEMM_SET:
        _check_tensor(torch, a, "a", op)
        _check_tensor(torch, b, "b", op)
        _check_dtype(torch, a, "a", op, _GEMM_DTYPES)
    if b.dtype is not a.dtype or a.get_device() != b.get_device() or a.is_cuda != b.is_cuda or a.is_meta != b.is_meta:
        _check_tensor(torch, b, "b", op)
        _check_same(torch, op, "a", a, ("b", b))
    da, db = a.dim(), b.dim()
    if da < 2 or db < 2:
        raise ValueError(f"{op}: a and b need at least 2 dimensions ([..., M, K] @ [..., K, N]); got a "
                         f"{tuple(a.shape)} and b {tuple(b.shape)} (unsqueeze a vector)")
    sa, sb = a.shape, b.shape
    if sa[-1] != sb[-2]:
        raise ValueError(f"{op}: a's last dimension ({sa[-1]}) must equal b's second-to-last "
                         f"({sb[-2]}): a {tuple(sa)} @ b {tuple(sb)}")
    if da == 2 and db == 2:
        return (), sa[0], sa[1], sb[1]
    batch_a, batch_b = sa[:-2], sb[:-2]
    if batch_a == batch_b or db == 2:
        batch = tuple(batch_a)
    elif da == 2:
        batch = tuple(batch_b)
    else:
        try:
            batch = tuple(torch.broadcast_shapes(batch_a, batch_b))
        except RuntimeError:
            raise ValueError(f"{op}: the batch dimensions of a {tuple(batch_a)} and b {tuple(batch_b)} "
                             "do not broadcast") from None
    return batch, sa[-2], sa[-1], sb[-1]


def _flatten_batch(t, batch, rows, cols):
    """[*batch, rows, cols] as [n, rows, cols] with a row-major inner matrix; a view when the batch
    dimensions flatten to one stride (broadcast ones included), else a copy."""
    t = t.expand(*batch, rows, cols)
    n = math.prod(batch)
    st = t.stride()
    inner_ok = (st[-1] == 1 or cols == 1) and (st[-2] == cols or rows == 1)
    if inner_ok:
        try:
            return t.view(n, rows, cols) if n > 0 else t.reshape(n, rows, cols)
        except RuntimeError:
            pass
        # Broadcast batch dimensions (stride 0) in front of one real one flatten to a single stride
        # only in special cases; copy otherwise.
    return t.reshape(n, rows, cols).contiguous()


_workspace_bytes = {}  # (M, N, K, torch dtype) -> kernels::Matmul's scratch bytes (0: none)


def _workspace_nbytes(a, M, N, K):
    """The scratch bytes the library GEMM needs for this shape (rows staged through padded
    buffers, split-K partials); 0 when none. The C++ side compiles the shape's kernels on the
    first query."""
    key = (M, N, K, a.dtype)
    n = _workspace_bytes.get(key)
    if n is None:
        n = _workspace_bytes[key] = _C.matmul_workspace_bytes(
            M, N, K, "bf16" if a.dtype == _torch.bfloat16 else "f16")
    return n


def _scratch(a, n):
    """n bytes of scratch for the library GEMM, allocated by torch's caching allocator on a's
    device and stream (freed when the call returns: the allocator reuses it only behind this
    stream's work), exported for the extension."""
    return _export(_torch.empty(n, dtype=_torch.uint8, device=a.device))


def _matmul_workspace(a, M, N, K):
    """The scratch this shape needs (_scratch), or None when it needs none."""
    n = _workspace_nbytes(a, M, N, K)
    return None if n == 0 else _scratch(a, n)


# 2-D GEMMs the general path has run on the GPU: (a.shape, b.shape, dtype) -> the scratch bytes
# (0: none). A key here means those shapes passed every check once (2-D, K equal, none empty) and
# their kernels are compiled, so matmul's hot path checks only what can differ between two calls
# with the same shapes: b's dtype, the device, contiguity, alignment and autograd.
_seen_2d = {}


def _matmul_impl(a, b):
    batch, M, K, N = _matmul_shape(_torch, a, b)
    if not a.is_cuda:
        return _matmul_cpu(_torch, a, b, batch, M, K, N)
    stream = _stream_and_check_device(a, "tessel.ops.matmul")
    if not batch:  # the common case, kept short: it is most of the per-call cost
        if M == 0 or N == 0 or K == 0:
            return a.new_zeros((M, N))
        a2, b2 = _row_major_2d(a), _row_major_2d(b)
        if a2.data_ptr() % 16 or b2.data_ptr() % 16:
            _aligned(_torch, a2, "a", "tessel.ops.matmul")
            _aligned(_torch, b2, "b", "tessel.ops.matmul")
        out = a.new_empty((M, N))
        n = _workspace_nbytes(a, M, N, K)
        ws = None if n == 0 else _scratch(a, n)
        _C.matmul_into(_export(a2), _export(b2), _export(out), stream, ws)
        if a2 is a and b2 is b:
            _seen_2d[(a.shape, b.shape, a.dtype)] = n
        return out
    out_shape = (*batch, M, N)
    if K == 0 or M == 0 or N == 0 or math.prod(batch) == 0:
        return a.new_zeros(out_shape)
    if b.dim() == 2:
        # One GEMM: a's batch dimensions fold into M.
        a2 = _row_major_2d(a.reshape(-1, K))
        b2 = _row_major_2d(b)
        _aligned(_torch, a2, "a", "tessel.ops.matmul")
        _aligned(_torch, b2, "b", "tessel.ops.matmul")
        out = a.new_empty((a2.shape[0], N))
        _C.matmul_into(_export(a2), _export(b2), _export(out), stream,
                       _matmul_workspace(a, a2.shape[0], N, K))
        return out.view(out_shape)
    a3 = _flatten_batch(a, batch, M, K)
    b3 = _flatten_batch(b, batch, K, N)
    esize = a.element_size()
    if (a3.stride(0) * esize) % 16 or (b3.stride(0) * esize) % 16 or (M * N * esize) % 16:
        # Batch entries that do not start on 16-byte boundaries (the kernel's vector loads need
        # them): each entry is launched on its own, copied to an aligned tensor where it is not.
        def entry(t, i):
            e = t[i]
            return e if e.data_ptr() % 16 == 0 else e.clone()

        outs = []
        for i in range(a3.shape[0]):
            o = a.new_empty((M, N))
            _C.matmul_into(_export(entry(a3, i)), _export(entry(b3, i)), _export(o), stream,
                           _matmul_workspace(a, M, N, K))
            outs.append(o)
        return _torch.stack(outs).view(out_shape)
    _aligned(_torch, a3, "a", "tessel.ops.matmul")
    _aligned(_torch, b3, "b", "tessel.ops.matmul")
    out = a.new_empty((a3.shape[0], M, N))
    _C.matmul_into(_export(a3), _export(b3), _export(out), stream, _matmul_workspace(a, M, N, K))
    return out.view(out_shape)


def _matmul_cpu(torch, a, b, batch, M, K, N):
    from ._dlpack import to_torch

    a3 = _flatten_batch(a, batch, M, K)
    b3 = _flatten_batch(b, batch, K, N)
    outs = [to_torch(_C.matmul_cpu(_export(a3[i]), _export(b3[i]))) for i in range(a3.shape[0])]
    if not outs:
        return torch.zeros((*batch, M, N), dtype=a.dtype)
    return torch.stack(outs).view(*batch, M, N)


def matmul(a, b):
    """``a @ b`` with Tessel's GEMM, for float16 or bfloat16 tensors (f32 accumulation).

    a ``[..., M, K]`` and b ``[..., K, N]`` with broadcasting batch dimensions, as ``torch.matmul``
    for inputs of 2 or more dimensions. A 2-D b is one GEMM over all of a's rows; a batched b is one
    launch per batch entry (broadcast operands are not copied). Operands are read row-major: a
    transposed view (``x.t()``, ``x.mT``) is first copied to a contiguous tensor by torch (the
    kernel has no transposed-operand variant). Runs the C++ library's ``kernels::Matmul``: rows
    that are not 16-byte aligned (K or N not a multiple of 8) go through zero-padded staging
    buffers, and skinny GEMMs (M <= 64) whose tiles would leave most SMs idle split K over more CTAs
    and sum the f32 partials (``kernels::plan_matmul``'s model decides); the scratch comes from
    torch's caching allocator on the current stream. Returns a new contiguous tensor.
    """
    # The hot path: a 2-D GEMM of shapes seen before, on row-major CUDA tensors of Tessel's GPU,
    # outside torch.compile and autograd (about half the attribute reads of the general path).
    if type(a) is _Tensor and type(b) is _Tensor and not _is_compiling():
        dt = a.dtype
        n = _seen_2d.get((a.shape, b.shape, dt))
        if (n is not None and b.dtype is dt and a.is_contiguous() and b.is_contiguous()
                and not (_grad_enabled() and (a.requires_grad or b.requires_grad))):
            dev = a.get_device()
            if dev == _device_ordinal and b.get_device() == dev and not (a.data_ptr() % 16 or b.data_ptr() % 16):
                out = a.new_empty((a.shape[0], b.shape[1]))
                ws = None if n == 0 else _scratch(a, n)
                _C.matmul_into(_export(a), _export(b), _export(out), _raw_stream(dev), ws)
                return out
    torch = _torch or _require_torch("tessel.ops.matmul")
    if _needs_dispatch(torch, a, b):
        return torch.ops.tessel.matmul(a, b)
    return _matmul_impl(a, b)


# ---- linear ------------------------------------------------------------------------------------

_zero_bias = {}


def _linear_shape(torch, x, weight, bias, activation, op="tessel.ops.linear"):
    _check_tensor(torch, x, "x", op)
    _check_tensor(torch, weight, "weight", op)
    _check_dtype(torch, x, "x", op, _GEMM_DTYPES)
    _check_same(torch, op, "x", x, ("weight", weight))
    if activation not in _ACTIVATIONS:
        raise ValueError(f"{op}: activation={activation!r}; legal: None, 'relu', 'silu', 'gelu'")
    if x.dim() < 1:
        raise ValueError(f"{op}: x must have at least 1 dimension ([..., in_features]); got a scalar")
    if weight.dim() != 2:
        raise ValueError(f"{op}: weight must be 2-D [out_features, in_features]; got {tuple(weight.shape)}")
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"{op}: x's last dimension ({x.shape[-1]}) must equal weight's in_features "
                         f"({weight.shape[1]}): x {tuple(x.shape)}, weight {tuple(weight.shape)}")
    if bias is not None:
        _check_tensor(torch, bias, "bias", op)
        _check_same(torch, op, "x", x, ("bias", bias))
        if bias.dim() != 1 or bias.shape[0] != weight.shape[0]:
            raise ValueError(f"{op}: bias must be 1-D [out_features] = [{weight.shape[0]}]; got "
                             f"{tuple(bias.shape)}")
    return tuple(x.shape[:-1]), x.shape[-1], weight.shape[0]


def _linear_impl(x, weight, bias=None, activation=None):
    torch = _torch
    lead, K, N = _linear_shape(torch, x, weight, bias, activation)
    M = math.prod(lead)
    x2 = _row_major_2d(x.reshape(M, K)) if M > 0 else x.reshape(M, K)
    # The kernel takes B = weight^T as a row-major [K, N] matrix: torch copies the transpose (one
    # pass over the weight per call; the GEMM has no transposed-B variant yet).
    wt = weight.t().contiguous()
    fused = "none" if activation in (None, "gelu") else activation
    if x.device.type == "cpu":
        from ._dlpack import to_torch

        b = bias if bias is not None else torch.zeros(N, dtype=x.dtype)
        out = to_torch(_C.linear_cpu(_export(x2.contiguous()), _export(wt), _export(b.contiguous()), fused))
    else:
        stream = _stream_and_check_device(x, "tessel.ops.linear")
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
        if M == 0 or N == 0:
            return out.view(*lead, N)
        if K == 0:
            out.zero_()
            if bias is not None:
                out += bias
        elif bias is None and fused == "none":
            _aligned(torch, x2, "x", "tessel.ops.linear")
            _C.matmul_into(_export(x2), _export(wt), _export(out), stream, _matmul_workspace(x, M, N, K))
        else:
            if bias is None:
                key = (N, x.dtype, x.device)
                b = _zero_bias.get(key)
                if b is None:
                    b = _zero_bias[key] = torch.zeros(N, dtype=x.dtype, device=x.device)
            else:
                b = bias.contiguous()
            _aligned(torch, x2, "x", "tessel.ops.linear")
            _aligned(torch, b, "bias", "tessel.ops.linear")
            _C.linear_into(_export(x2), _export(wt), _export(b), _export(out), fused, stream)
    if activation == "gelu":
        out = torch.nn.functional.gelu(out)  # not fused: torch's kernel after the GEMM
    return out.view(*lead, N)


def linear(x, weight, bias=None, activation=None):
    """``act(x @ weight.T + bias)``, torch's ``F.linear`` layout, with Tessel's fused GEMM.

    x ``[..., in_features]``, weight ``[out_features, in_features]``, bias ``[out_features]`` or
    None, all float16 or bfloat16. ``activation``: None, ``"relu"`` or ``"silu"`` — added with the
    bias in the GEMM's epilogue (a kernel with a zero bias when bias is None) — or ``"gelu"``, which
    the kernels lack: torch's gelu runs after the GEMM. The weight is transposed into a row-major
    copy by torch on every call (the GEMM reads B as [K, N]; it has no transposed-B form yet).
    """
    torch = _require_torch("tessel.ops.linear")
    if _needs_dispatch(torch, x, weight, bias):
        return torch.ops.tessel.linear(x, weight, bias, activation)
    return _linear_impl(x, weight, bias, activation)


# ---- softmax -----------------------------------------------------------------------------------

def _softmax_dim(torch, x, dim, op="tessel.ops.softmax"):
    if not isinstance(x, torch.Tensor) or x.dtype not in _SOFTMAX_SET:
        _check_tensor(torch, x, "x", op)
        _check_dtype(torch, x, "x", op, _SOFTMAX_DTYPES)
    if not isinstance(dim, int):
        raise TypeError(f"{op}: dim must be an int; got {type(dim).__name__}")
    nd = max(x.dim(), 1)
    if not -nd <= dim < nd:
        raise ValueError(f"{op}: dim={dim} is out of range for a tensor of {x.dim()} dimensions "
                         f"(legal: {-nd} to {nd - 1})")
    return dim % nd


def _softmax_impl(x, dim=-1):
    d = _softmax_dim(_torch, x, dim)
    nd = x.dim()
    if x.is_cuda and nd == 2 and d == 1:  # the common case, kept short
        stream = _stream_and_check_device(x, "tessel.ops.softmax")
        x2 = _row_major_2d(x)
        y = x.new_empty(x.shape)
        if x.numel() > 0:
            if x2.data_ptr() % 16:
                _aligned(_torch, x2, "x", "tessel.ops.softmax")
            _C.softmax_into(_export(x2), _export(y), stream)
        return y
    if nd == 0:
        return _torch.ones_like(x)
    moved = x if d == nd - 1 else x.movedim(d, -1)
    N = moved.shape[-1]
    M = math.prod(moved.shape[:-1])
    x2 = _row_major_2d(moved.reshape(M, N)) if M * N > 0 else moved.reshape(M, N)
    if not x.is_cuda:
        from ._dlpack import to_torch

        y2 = to_torch(_C.softmax_cpu(_export(x2))) if M * N > 0 else x.new_empty((M, N))
    else:
        stream = _stream_and_check_device(x, "tessel.ops.softmax")
        y2 = x.new_empty((M, N))
        if M * N > 0:
            _aligned(_torch, x2, "x", "tessel.ops.softmax")
            _C.softmax_into(_export(x2), _export(y2), stream)
    y = y2.view(moved.shape)
    return y if d == nd - 1 else y.movedim(-1, d)


def softmax(x, dim: int = -1):
    """``torch.softmax(x, dim)`` with Tessel's fused softmax (math in f32; torch's meaning for -inf
    and NaN), for float16, bfloat16 or float32.

    The kernel reduces the last dimension of a row-major 2-D tensor: the other dimensions are
    flattened into rows (a view for contiguous x). For ``dim`` other than the last, torch copies x
    with that dimension moved last, and the result is returned as a view with it moved back.
    """
    torch = _torch or _require_torch("tessel.ops.softmax")
    if _needs_dispatch(torch, x):
        return torch.ops.tessel.softmax(x, dim)
    return _softmax_impl(x, dim)


# ---- flash attention ---------------------------------------------------------------------------

def _attention_check(torch, q, k, v, scale, op="tessel.ops.flash_attention"):
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(torch, t, name, op)
    _check_dtype(torch, q, "q", op, _GEMM_DTYPES)
    _check_same(torch, op, "q", q, ("k", k), ("v", v))
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"{op}: {name} must be 4-D [batch, heads, seqlen, head_dim] (torch's SDPA "
                             f"layout); got {tuple(t.shape)}")
    B, H, Sq, D = q.shape
    if k.shape != v.shape:
        raise ValueError(f"{op}: k {tuple(k.shape)} and v {tuple(v.shape)} must have one shape")
    if k.shape[0] != B or k.shape[3] != D:
        raise ValueError(f"{op}: k/v {tuple(k.shape)} must have q's batch ({B}) and head_dim ({D})")
    Hkv, Sk = k.shape[1], k.shape[2]
    if Hkv == 0 or H % Hkv != 0:
        raise ValueError(f"{op}: k/v's {Hkv} heads must divide q's {H} heads (multi-head, grouped-query or "
                         "multi-query attention)")
    if D % 8 != 0 or not 8 <= D <= 256:
        raise ValueError(f"{op}: head_dim {D}; legal: a multiple of 8 from 8 to 256")
    if scale is not None and (not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale == 0):
        raise ValueError(f"{op}: scale={scale!r}; legal: None (1/sqrt(head_dim)) or a finite non-zero float")
    return B, H, Hkv, Sq, Sk, D


def _bshd(t):
    """The [B, S, H, D] view of a [B, H, S, D] tensor (no copy); head_dim made contiguous by a copy
    if it is not."""
    if t.stride(3) != 1:
        t = t.contiguous()
    return t.transpose(1, 2)


def _attention_impl(q, k, v, causal=False, scale=None):
    torch = _torch
    B, H, Hkv, Sq, Sk, D = _attention_check(torch, q, k, v, scale)
    s = 0.0 if scale is None else float(scale)
    qb, kb, vb = _bshd(q), _bshd(k), _bshd(v)
    if q.device.type == "cpu":
        from ._dlpack import to_torch

        o, lse = (to_torch(c) for c in _C.attention_cpu(_export(qb), _export(kb), _export(vb), bool(causal), s))
        return o.transpose(1, 2), lse
    stream = _stream_and_check_device(q, "tessel.ops.flash_attention")
    o = torch.empty((B, Sq, H, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, Sq), dtype=torch.float32, device=q.device)
    if B * H * Sq > 0:
        if Sk == 0:
            o.zero_()
            lse.fill_(-math.inf)
        else:
            for name, t in (("q", qb), ("k", kb), ("v", vb)):
                _aligned(torch, t, name, "tessel.ops.flash_attention")
            _C.attention_into(_export(qb), _export(kb), _export(vb), _export(o), _export(lse), bool(causal), s,
                              stream)
    return o.transpose(1, 2), lse


def flash_attention(q, k, v, causal: bool = False, scale=None, return_lse: bool = False):
    """Scaled dot-product attention's forward pass with Tessel's FlashAttention kernel.

    Layout as ``torch.nn.functional.scaled_dot_product_attention``: q ``[B, H, Sq, D]``, k and v
    ``[B, H_kv, Sk, D]`` (H_kv divides H: multi-head, grouped-query, multi-query), float16 or
    bfloat16, D a multiple of 8 up to 256. The C++ kernel takes ``[B, S, H, D]`` tensors with any
    strides on B, S and H, so q, k and v are passed as their ``transpose(1, 2)`` views — no copy for
    contiguous BHSD inputs, nor for BSHD storage seen as BHSD (``x.transpose(1, 2)`` of a [B, S, H, D]
    tensor); only a head dimension that is not contiguous is copied. Each distinct stride pattern
    is its own compiled kernel.

    ``causal``: query i sees keys j <= i + Sk - Sq (aligned to the bottom-right corner, as
    FlashAttention 2; SDPA's ``is_causal`` aligns top-left, which differs when Sq != Sk). ``scale``:
    None for 1/sqrt(D). Returns O ``[B, H, Sq, D]`` — a view of a row-major [B, Sq, H, D] buffer,
    as FlashAttention's own output — and with ``return_lse`` also LSE ``[B, H, Sq]`` float32 (the
    natural-log log-sum-exp of each row's scaled scores). No backward pass yet.
    """
    torch = _require_torch("tessel.ops.flash_attention")
    if _needs_dispatch(torch, q, k, v):
        o, lse = torch.ops.tessel.flash_attention(q, k, v, bool(causal), scale)
    else:
        o, lse = _attention_impl(q, k, v, causal, scale)
    return (o, lse) if return_lse else o
