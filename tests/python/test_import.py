"""Build and import: the module loads, says what it sees, and works without torch."""

import os
import subprocess
import sys
import textwrap

import pytest

import tessel


def test_version_and_info():
    info = tessel.info()
    assert tessel.__version__ == info["version"]
    for key in ("nvrtc_version", "gpu_available", "arch", "kernel_cache", "no_gpu_reason"):
        assert key in info
    if info["gpu_available"]:
        assert info["gpu"]["name"] and info["arch"].startswith("sm_")
    else:
        assert info["no_gpu_reason"]
        assert info["arch"] == "sm_90a"  # compile-only target without a GPU


def test_exception_hierarchy():
    assert issubclass(tessel.CompileError, tessel.TesselError)
    assert issubclass(tessel.CompileError, ValueError)
    assert issubclass(tessel.TesselError, RuntimeError)
    assert issubclass(tessel.GPUUnavailableError, tessel.TesselError)


def _run_without_torch(code):
    # `sys.modules["torch"] = None` makes `import torch` fail as if torch were not installed.
    prelude = "import sys\nsys.modules['torch'] = None\n"
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)


def test_import_without_torch():
    r = _run_without_torch("""
        import tessel
        assert tessel.info()["version"]
        k = tessel.compile_softmax(4, 32, "f32")
        assert "softmax" in k.source
        try:
            tessel.ops.matmul(None, None)
        except ImportError as e:
            assert "torch is not installed" in str(e), e
            print("ok")
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_unknown_attribute():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tessel.nope
