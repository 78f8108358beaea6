"""DLPack helpers: handing capsules from tessel._C to consumers, and taking torch tensors in.

tessel._C returns results of the CPU interpreter and of ``Kernel.__call__`` as DLPack capsules
(the 0.x ABI, which every consumer takes). :class:`DLPackCapsule` wraps one in the ``__dlpack__``
protocol so that ``torch.from_dlpack``/``numpy.from_dlpack`` take it without a copy.
"""

from __future__ import annotations


class DLPackCapsule:
    """A tensor made by tessel._C, owned by its capsule until a consumer takes it (once)."""

    __slots__ = ("_capsule", "_device")

    def __init__(self, capsule, device=(1, 0)):
        self._capsule = capsule
        self._device = device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self._capsule is None:
            raise RuntimeError("this tensor was already handed to a DLPack consumer (a capsule is consumed once)")
        capsule, self._capsule = self._capsule, None
        return capsule

    def __dlpack_device__(self):
        return self._device

    def __repr__(self):
        state = "consumed" if self._capsule is None else "unconsumed"
        return f"<tessel DLPack tensor on device {self._device}, {state}>"


def to_torch(capsule):
    """A torch tensor over a capsule from tessel._C (no copy)."""
    import torch.utils.dlpack

    return torch.utils.dlpack.from_dlpack(capsule)


def torch_exporter():
    """The cheapest way this torch has to export a tensor as a DLPack capsule from C++:
    a versioned capsule (DLPack 1.x, torch >= 2.9) when torch has one, else the 0.x capsule."""
    import torch

    versioned = getattr(torch._C, "_to_dlpack_versioned", None)
    if versioned is not None:
        return versioned
    return torch.utils.dlpack.to_dlpack
