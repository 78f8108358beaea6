"""tessel.Kernel: a compiled kernel's view (source, PTX, resources, the compiler's decisions) and
its calls, and the library kernels' constructors. Compiling needs NVRTC, not a GPU."""

from __future__ import annotations

from . import _C
from ._dlpack import DLPackCapsule


def _wrap_outputs(capsules, device):
    try:
        import torch.utils.dlpack  # noqa: F401
    except ImportError:
        return [DLPackCapsule(c, device) for c in capsules]
    from ._dlpack import to_torch

    return [to_torch(c) for c in capsules]


class Kernel:
    """A compiled Tessel kernel.

    ``source`` (the generated CUDA C++), ``ptx``, ``resources`` (registers, spills, shared memory,
    compile time, whether the kernel cache had it), ``info`` (threads, the path taken — the sm_90a
    TMA + wgmma pipeline or mma.sync — and why a fast path was declined), ``ir`` and ``lowered_ir``.

    ``kernel(*inputs)`` launches on CUDA tensors (any DLPack producer) and returns the outputs
    (allocated by Tessel, as torch tensors when torch is there); ``kernel.launch(*all_args,
    stream=...)`` takes the outputs too; ``kernel.run_on_cpu(*inputs)`` runs the program on the CPU
    reference interpreter.
    """

    __slots__ = ("_k",)

    def __init__(self, k):
        self._k = k

    name = property(lambda self: self._k.name)
    source = property(lambda self: self._k.source, doc="The generated CUDA C++.")
    ptx = property(lambda self: self._k.ptx)
    compile_log = property(lambda self: self._k.compile_log)
    resources = property(lambda self: self._k.resources)
    info = property(lambda self: self._k.info)
    ir = property(lambda self: self._k.ir)
    lowered_ir = property(lambda self: self._k.lowered_ir)

    def __call__(self, *inputs, stream: int = 0):
        return _wrap_outputs(self._k(*inputs, stream=stream), (2, max(_C.device_ordinal(), 0)))

    def launch(self, *args, stream: int = 0) -> None:
        self._k.launch(*args, stream=stream)

    def run_on_cpu(self, *inputs):
        return _wrap_outputs(self._k.run_on_cpu(*inputs), (1, 0))

    def __repr__(self):
        r = self.resources
        return (f"<tessel.Kernel {self.name} for {r['arch']}: {r['registers']} registers, "
                f"{self.info['threads']} threads, {self.info['path']}>")


def compile_matmul(M: int, N: int, K: int, dtype: str = "f16", arch: str = "") -> Kernel:
    """The library GEMM C = A B (row-major A [M, K], B [K, N]) with the config ``tessel.ops.matmul``
    uses (a tuned one when the tuning cache has it). ``arch`` (e.g. ``"sm_80"``) compiles for
    another target with its built-in config; empty: the GPU's arch, or sm_90a without a GPU."""
    return Kernel(_C.compile_matmul(M, N, K, dtype, arch))


def compile_linear(M: int, N: int, K: int, dtype: str = "f16", activation: str = "none", arch: str = "") -> Kernel:
    """The fused linear layer C = act(A B + bias) (A [M, K], B [K, N], bias [N]); ``activation``:
    none, relu or silu, applied in the GEMM's epilogue."""
    return Kernel(_C.compile_linear(M, N, K, dtype, activation, arch))


def compile_softmax(M: int, N: int, dtype: str = "f16", arch: str = "") -> Kernel:
    """The fused softmax over the last dimension of an [M, N] tensor."""
    return Kernel(_C.compile_softmax(M, N, dtype, arch))


def compile_flash_attention(batch: int, heads: int, kv_heads: int, seqlen_q: int, seqlen_k: int, dim: int,
                            dtype: str = "bf16", causal: bool = False, scale: float = 0.0,
                            arch: str = "") -> Kernel:
    """FlashAttention's forward pass for row-major [B, S, H, D] tensors (parameters Q, K, V, O,
    LSE); ``scale`` 0 means 1/sqrt(dim)."""
    return Kernel(_C.compile_flash_attention(batch, heads, kv_heads, seqlen_q, seqlen_k, dim, dtype, causal,
                                             scale, arch))
