"""python -m tessel.bench gemm|softmax|attention|overhead [...] [--json FILE]

Tessel beside PyTorch's own kernels in one process, on the same tensors, interleaved (each round
times every contender once, in an order that alternates between rounds), CUDA events around each
timed call, medians over the rounds:

  gemm       tessel.ops.matmul vs torch.matmul (cuBLAS)
  softmax    tessel.ops.softmax vs torch.softmax
  attention  tessel.ops.flash_attention vs scaled_dot_product_attention with the cuDNN and the
             flash backends (each skipped, with the reason, when torch cannot run it)
  overhead   the Python call path of a cached kernel: without a GPU, the CPU side of
             tessel.ops.matmul up to the launch (everything but cuLaunchKernel); with one, calls per
             second of a small cached matmul against torch.matmul's

Timings go through the Python API, so they include the call overhead (for kernels that run
longer than a launch, the GPU hides it). Exit status 0, or 2 when a GPU benchmark has no GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import subprocess
import sys
import time

import tessel
from tessel import _C


def _torch():
    try:
        import torch
    except ImportError:
        sys.exit("python -m tessel.bench needs torch (pip install torch)")
    return torch


def _time_rounds(torch, contenders, rounds, inner, flush=None):
    """{name: median ms per call} over `rounds` interleaved rounds of `inner` calls each."""
    times = {name: [] for name, _ in contenders}
    for r in range(rounds):
        order = contenders if r % 2 == 0 else list(reversed(contenders))
        for name, fn in order:
            if flush is not None:
                flush()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) / inner)
    return {name: statistics.median(v) for name, v in times.items()}


def _rel(torch, got, want):
    want = want.double()
    return float((got.double() - want).norm() / max(float(want.norm()), 1e-30))


def _provenance(torch):
    info = tessel.info()
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5).stdout.strip()
    except Exception:  # noqa: BLE001
        commit = ""
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tessel": info["version"],
        "commit": commit or "unknown",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": (info["gpu"] or {}).get("name"),
        "arch": info["arch"],
        "command": " ".join(["python -m tessel.bench"] + sys.argv[1:]),
    }


def _table(rows, columns):
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for r in rows:
        print("  ".join(str(r.get(c, "")).ljust(w) for c, w in zip(columns, widths)))


def _dtype(torch, name):
    names = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}
    if name not in names:
        sys.exit(f"--dtype takes f16, bf16 or f32, not '{name}'")
    return getattr(torch, names[name])


def _parse_shapes(text, n, what):
    shapes = []
    for item in text.split(","):
        parts = item.lower().split("x")
        if len(parts) != n or not all(p.isdigit() and int(p) > 0 for p in parts):
            sys.exit(f"--shapes: '{item}' is not {what} (positive integers joined by 'x')")
        shapes.append(tuple(int(p) for p in parts))
    return shapes


def bench_gemm(args, torch):
    rows = []
    for dname in args.dtype.split(","):
        dt = _dtype(torch, dname)
        for M, N, K in _parse_shapes(args.shapes or "4096x4096x4096,8192x8192x8192", 3, "MxNxK"):
            a = torch.randn(M, K, device="cuda", dtype=dt)
            b = torch.randn(K, N, device="cuda", dtype=dt)
            c = tessel.ops.matmul(a, b)  # compiles (or reads the kernel cache)
            err = _rel(torch, c, torch.matmul(a, b))
            ms = _time_rounds(torch, [("tessel", lambda: tessel.ops.matmul(a, b)),
                                      ("torch", lambda: torch.matmul(a, b))], args.repeats, args.inner)
            flops = 2.0 * M * N * K
            rows.append({"shape": f"{M}x{N}x{K}", "dtype": dname,
                         "tessel_ms": round(ms["tessel"], 4), "torch_ms": round(ms["torch"], 4),
                         "tessel_tflops": round(flops / ms["tessel"] / 1e9, 1),
                         "torch_tflops": round(flops / ms["torch"] / 1e9, 1),
                         "speedup": round(ms["torch"] / ms["tessel"], 3), "rel_err": f"{err:.1e}"})
            del a, b, c
    _table(rows, ["shape", "dtype", "tessel_ms", "torch_ms", "tessel_tflops", "torch_tflops", "speedup", "rel_err"])
    return rows


def bench_softmax(args, torch):
    rows = []
    for dname in args.dtype.split(","):
        dt = _dtype(torch, dname)
        esize = torch.empty((), dtype=dt).element_size()
        # Default: 512 MiB inputs with rows of 1024 and 4096 elements.
        default = ",".join(f"{(512 << 20) // (esize * n)}x{n}" for n in (1024, 4096))
        for M, N in _parse_shapes(args.shapes or default, 2, "MxN"):
            x = torch.randn(M, N, device="cuda", dtype=dt) * 4
            y = tessel.ops.softmax(x)
            err = _rel(torch, y[:4096], torch.softmax(x[:4096].double(), -1))
            ms = _time_rounds(torch, [("tessel", lambda: tessel.ops.softmax(x)),
                                      ("torch", lambda: torch.softmax(x, -1))], args.repeats, args.inner)
            nbytes = 2.0 * M * N * esize
            rows.append({"shape": f"{M}x{N}", "dtype": dname, "MiB": M * N * esize >> 20,
                         "tessel_ms": round(ms["tessel"], 4), "torch_ms": round(ms["torch"], 4),
                         "tessel_GBps": round(nbytes / ms["tessel"] / 1e6), "torch_GBps": round(nbytes / ms["torch"] / 1e6),
                         "speedup": round(ms["torch"] / ms["tessel"], 3), "rel_err": f"{err:.1e}"})
            del x, y
    _table(rows, ["shape", "dtype", "MiB", "tessel_ms", "torch_ms", "tessel_GBps", "torch_GBps", "speedup", "rel_err"])
    return rows


def bench_attention(args, torch):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sdpa = torch.nn.functional.scaled_dot_product_attention
    rows = []
    cases = args.shapes or "2x16x4096x128,2x16x4096x128:causal,4x32x2048x64,1x16x16384x128"
    for dname in args.dtype.split(","):
        dt = _dtype(torch, dname)
        for case in cases.split(","):
            causal = case.endswith(":causal")
            (B, H, S, D), = _parse_shapes(case.removesuffix(":causal"), 4, "BxHxSxD")
            q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dt) for _ in range(3))
            o = tessel.ops.flash_attention(q, k, v, causal=causal)
            contenders = [("tessel", lambda: tessel.ops.flash_attention(q, k, v, causal=causal))]
            notes, errs = [], {"tessel": _rel(torch, o, sdpa(q, k, v, is_causal=causal))}
            for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
                def run(backend=backend):
                    with sdpa_kernel(backend):
                        return sdpa(q, k, v, is_causal=causal)
                try:
                    errs[name] = _rel(torch, run(), o)
                    contenders.append((name, run))
                except Exception as e:  # noqa: BLE001  (a backend torch cannot run here)
                    notes.append(f"{name}: {str(e).splitlines()[0][:80]}")
            ms = _time_rounds(torch, contenders, args.repeats, args.inner)
            flops = 4.0 * B * H * S * S * D / (2 if causal else 1)
            row = {"case": case, "dtype": dname, "tessel_tflops": round(flops / ms["tessel"] / 1e9, 1)}
            for name in ("cudnn", "flash"):
                if name in ms:
                    row[f"{name}_tflops"] = round(flops / ms[name] / 1e9, 1)
                    row[f"vs_{name}"] = round(ms[name] / ms["tessel"], 3)
            row["tessel_ms"] = round(ms["tessel"], 4)
            row["rel_err"] = f"{errs['tessel']:.1e}"
            if notes:
                row["notes"] = "; ".join(notes)
            rows.append(row)
            del q, k, v, o
    _table(rows, ["case", "dtype", "tessel_ms", "tessel_tflops", "cudnn_tflops", "vs_cudnn", "flash_tflops",
                  "vs_flash", "rel_err", "notes"])
    return rows


def _per_call_us(fn, n, sync=None):
    """Best of 9 runs of n calls: the CPU time per call. With a GPU, `sync` empties the queue before
    each run and n stays below the launch queue's depth, so the CPU never waits for the GPU."""
    fn()
    best = math.inf
    for _ in range(9):
        if sync is not None:
            sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def bench_overhead(args, torch):
    """The Python call path's cost per call for a cached kernel (best of 5 runs of n calls)."""
    from tessel import ops

    ops._require_torch("bench")
    n = args.inner * 100
    rows = []
    if _C.gpu_available():
        a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
        ops.matmul(a, a)
        torch.cuda.synchronize()
        # The CPU side of each call (Python, checks, allocation, launch): 200 calls per run, fewer
        # than the launch queue holds, so a GPU slower than the calls does not slow them.
        for name, fn in (("tessel.ops.matmul 64^3 f16", lambda: ops.matmul(a, a)),
                         ("torch.matmul 64^3 f16", lambda: torch.matmul(a, a)),
                         ("tessel.ops.softmax 64x64 f16", lambda: ops.softmax(a)),
                         ("torch.softmax 64x64 f16", lambda: torch.softmax(a, -1))):
            us = _per_call_us(fn, 200, torch.cuda.synchronize)
            torch.cuda.synchronize()
            rows.append({"path": name, "us_per_call": round(us, 2)})
        # The floor: the same cached kernel launched 200 times from C++ (no Python, no checks, no
        # allocation, tensors imported once) -- what the driver's launch itself costs on this host.
        out = torch.empty(64, 64, device="cuda", dtype=torch.float16)
        stream = torch.cuda.current_stream().cuda_stream
        best = math.inf
        for _ in range(9):
            torch.cuda.synchronize()
            best = min(best, _C.matmul_launch_loop_us(ops._export(a), ops._export(a), ops._export(out), stream, 200))
        torch.cuda.synchronize()
        rows.append({"path": "bare C++ launch of the same matmul kernel (cuLaunchKernel floor)",
                     "us_per_call": round(best, 2)})
    else:
        # No GPU: every step of tessel.ops.matmul's CUDA path except the launch, on CPU tensors
        # (the same checks, allocation by torch, DLPack export, argument import, kernel lookup).
        a = torch.randn(64, 64, dtype=torch.float16)
        export = ops._export

        def replica():
            # tessel.ops.matmul's hot path (a 2-D shape seen before), step by step, launch left out.
            if type(a) is torch.Tensor and type(a) is torch.Tensor and not ops._is_compiling():
                dt = a.dtype
                ops._seen_2d.get((a.shape, a.shape, dt))
                if (a.dtype is dt and a.is_contiguous() and a.is_contiguous()
                        and not (ops._grad_enabled() and (a.requires_grad or a.requires_grad))):
                    dev = a.get_device()
                    if a.get_device() == dev and not (a.data_ptr() % 16 or a.data_ptr() % 16):
                        out = a.new_empty((a.shape[0], a.shape[1]))
                        _C.matmul_overhead_probe(export(a), export(a), export(out), 0)
                        return out
            raise AssertionError("the replica left the hot path")

        steps = {
            "ops.matmul CUDA path minus the launch (replica)": replica,
            "  first-call checks (_matmul_shape; the hot path skips them)": lambda: ops._matmul_shape(torch, a, a),
            "  output allocation (new_empty; CPU allocator here)": lambda: a.new_empty((64, 64)),
            "  DLPack export of one tensor": lambda: export(a),
            "  _C probe: 3 imports + views + kernel lookup": lambda: _C.matmul_overhead_probe(export(a), export(a),
                                                                                                export(a), 0),
            "torch.matmul 64^3 f16 on the CPU (reference point)": lambda: torch.matmul(a, a),
        }
        for name, fn in steps.items():
            rows.append({"path": name, "us_per_call": round(_per_call_us(fn, n), 2)})
    _table(rows, ["path", "us_per_call"])
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tessel.bench", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", nargs="+", choices=["gemm", "softmax", "attention", "overhead"],
                   help="one or more benchmarks, run in this order")
    p.add_argument("--shapes", help="gemm: MxNxK,...; softmax: MxN,...; attention: BxHxSxD[:causal],...")
    p.add_argument("--dtype", default=None, help="comma-separated: f16, bf16 (and f32 for softmax)")
    p.add_argument("--repeats", type=int, default=20, help="interleaved rounds (medians over them)")
    p.add_argument("--inner", type=int, default=10, help="calls per timed batch")
    p.add_argument("--json", help="also write the rows and provenance as JSON to FILE")
    args = p.parse_args(argv)
    if args.repeats < 1 or args.inner < 1:
        p.error("--repeats and --inner must be positive")
    if args.shapes and len([w for w in args.what if w != "overhead"]) > 1:
        p.error("--shapes applies to one benchmark at a time (gemm, softmax or attention)")
    torch = _torch()
    gpu_work = [w for w in args.what if w != "overhead"]
    if gpu_work:
        if not _C.gpu_available():
            print(f"python -m tessel.bench {' '.join(gpu_work)}: no GPU: {_C.gpu_unavailable_reason()}",
                  file=sys.stderr)
            return 2
        if not torch.cuda.is_available():
            print(f"python -m tessel.bench {' '.join(gpu_work)}: torch sees no CUDA device", file=sys.stderr)
            return 2
    dtype = args.dtype
    results = {}
    for what in args.what:
        args.dtype = dtype or {"gemm": "bf16,f16", "softmax": "f16", "attention": "bf16"}.get(what, "f16")
        print(f"== {what}")
        results[what] = {"gemm": bench_gemm, "softmax": bench_softmax, "attention": bench_attention,
                         "overhead": bench_overhead}[what](args, torch)
        print()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**_provenance(torch), "benchmarks": results}, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
