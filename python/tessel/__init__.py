"""Tessel: a tile-level GPU kernel language embedded in C++20, from Python.

``import tessel`` needs neither torch nor a GPU. Without a GPU the compile-only parts work
(``tessel.compile_matmul(...).source``, ``.ptx``, ``.resources``, ``tessel.tune(...,
compile_only=True)``) and the ops run CPU tensors on the reference interpreter; calls that need a
GPU raise :class:`GPUUnavailableError` saying why. ``tessel.ops`` holds the kernels for torch
tensors (torch is imported when an op is first called). docs/python.md is the guide.
"""

from __future__ import annotations

try:
    from . import _C
except ImportError as e:  # pragma: no cover - a broken install
    raise ImportError(
        "tessel's extension module tessel._C did not load: " + str(e) + ". Install the package with "
        "`pip install .` from the repository (it builds the extension against the CUDA toolkit); "
        "NVRTC (libnvrtc) from the toolkit must be findable at run time."
    ) from e

from ._kernel import Kernel, compile_flash_attention, compile_linear, compile_matmul, compile_softmax

TesselError = _C.TesselError
CompileError = _C.CompileError
InternalError = _C.InternalError
GPUUnavailableError = _C.GPUUnavailableError

__version__ = _C.__version__

__all__ = [
    "CompileError",
    "GPUUnavailableError",
    "InternalError",
    "Kernel",
    "TesselError",
    "compile_flash_attention",
    "compile_linear",
    "compile_matmul",
    "compile_softmax",
    "gpu_available",
    "info",
    "ops",
    "tune",
]


def info() -> dict:
    """What Tessel sees: its version, the GPU (or why there is none, ``no_gpu_reason``), the arch it
    compiles for, NVRTC's version and the kernel cache folder (``$TESSEL_CACHE_DIR``)."""
    return _C.info()


def gpu_available() -> bool:
    """True when the CUDA driver loaded and Tessel's device (0, or ``$TESSEL_DEVICE``) is there."""
    return _C.gpu_available()


def tune(kernel: str, *, dtype: str = "f16", strategy: str = "halving", budget: int = 0, repeats: int = 0,
         compile_only: bool = False, use_cache: bool = True, **shape) -> dict:
    """The C++ autotuner over a library kernel's config space.

    ``kernel`` is ``"gemm"`` (shape ``M=, N=, K=``), ``"softmax"`` (``M=, N=``) or ``"attention"``
    (``batch=, heads=, kv_heads=, seqlen_q=, seqlen_k=, dim=, causal=``). With a GPU, candidates are
    compiled in parallel, checked against float64 on sampled outputs, timed with CUDA events (L2
    flushed) and searched (``strategy``: halving, random or exhaustive); the winner goes into the
    tuning cache, where ``tessel.ops`` (and ``tessel tune``/the C++ entry points) find it for this
    shape — in a new process, or for a shape the ops have not compiled yet in this one. With
    ``compile_only=True`` (no GPU needed) every candidate the space keeps is compiled and reported.

    Returns a dict: ``table`` (one row per candidate: config, status, ms, registers, spills, shared
    memory), and without ``compile_only`` ``found``, ``config``, ``ms``, ``from_cache`` and
    ``kernel_object`` (the winner as a :class:`Kernel`).
    """
    result = _C.tune(kernel, shape, dtype, strategy, budget, repeats, compile_only, use_cache)
    if result.get("kernel_object") is not None:
        result["kernel_object"] = Kernel(result["kernel_object"])
    return result


def __getattr__(name):
    # tessel.ops and tessel.bench are imported on first use: torch is only needed there.
    if name in ("ops", "bench"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tessel' has no attribute {name!r}")
