"""The python test tier (pytest): runs without a GPU (GPU tests report SKIPPED with the reason)
and, for the torch tests, with torch's CPU side only (they skip with the reason when torch is not
installed)."""

import pytest

import tessel


def _no_gpu_reason():
    info = tessel.info()
    return None if info["gpu_available"] else "no GPU: " + str(info["no_gpu_reason"])


NO_GPU = _no_gpu_reason()
requires_gpu = pytest.mark.skipif(NO_GPU is not None, reason=NO_GPU or "")


@pytest.fixture(scope="session")
def torch():
    return pytest.importorskip("torch", reason="torch is not installed: the torch tests need it")
