"""Every op's argument errors, by message: which argument, and what is legal."""

import pytest

import tessel


def t(torch, *shape, dtype=None, device="cpu"):
    return torch.zeros(*shape, dtype=dtype or torch.float16, device=device)


def test_matmul_errors(torch):
    mm = tessel.ops.matmul
    with pytest.raises(TypeError, match="a must be a torch.Tensor; got list"):
        mm([1], t(torch, 2, 2))
    with pytest.raises(TypeError, match=r"a has dtype torch.float32; legal: torch.float16, torch.bfloat16"):
        mm(t(torch, 2, 2, dtype=torch.float32), t(torch, 2, 2, dtype=torch.float32))
    with pytest.raises(TypeError, match="b has dtype torch.bfloat16 but a has torch.float16; they must match"):
        mm(t(torch, 2, 2), t(torch, 2, 2, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"a's last dimension \(3\) must equal b's second-to-last \(4\)"):
        mm(t(torch, 2, 3), t(torch, 4, 5))
    with pytest.raises(ValueError, match="need at least 2 dimensions"):
        mm(t(torch, 3), t(torch, 3, 2))
    with pytest.raises(ValueError, match=r"batch dimensions of a \(2,\) and b \(3,\) do not broadcast"):
        mm(t(torch, 2, 4, 4), t(torch, 3, 4, 4))
    with pytest.raises(ValueError, match="b is on meta but a is on cpu; all tensors must be on one device"):
        mm(t(torch, 2, 2), t(torch, 2, 2, device="meta"))


def test_linear_errors(torch):
    lin = tessel.ops.linear
    with pytest.raises(ValueError, match=r"activation='tanh'; legal: None, 'relu', 'silu', 'gelu'"):
        lin(t(torch, 2, 4), t(torch, 3, 4), activation="tanh")
    with pytest.raises(ValueError, match=r"weight must be 2-D \[out_features, in_features\]; got \(4,\)"):
        lin(t(torch, 2, 4), t(torch, 4))
    with pytest.raises(ValueError, match=r"x's last dimension \(5\) must equal weight's in_features \(4\)"):
        lin(t(torch, 2, 5), t(torch, 3, 4))
    with pytest.raises(ValueError, match=r"bias must be 1-D \[out_features\] = \[3\]; got \(4,\)"):
        lin(t(torch, 2, 4), t(torch, 3, 4), t(torch, 4))
    with pytest.raises(TypeError, match="bias has dtype torch.float32 but x has torch.float16"):
        lin(t(torch, 2, 4), t(torch, 3, 4), t(torch, 3, dtype=torch.float32))
    with pytest.raises(TypeError, match="weight must be a torch.Tensor; got NoneType"):
        lin(t(torch, 2, 4), None)


def test_softmax_errors(torch):
    sm = tessel.ops.softmax
    with pytest.raises(TypeError, match=r"x has dtype torch.int32; legal: torch.float16, torch.bfloat16, "
                                        r"torch.float32"):
        sm(torch.zeros(2, 2, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"dim=2 is out of range for a tensor of 2 dimensions \(legal: -2 to 1\)"):
        sm(t(torch, 2, 2), dim=2)
    with pytest.raises(TypeError, match="dim must be an int; got str"):
        sm(t(torch, 2, 2), dim="last")


def test_flash_attention_errors(torch):
    fa = tessel.ops.flash_attention
    q, kv = t(torch, 1, 4, 8, 64), t(torch, 1, 2, 8, 64)
    with pytest.raises(ValueError, match=r"q must be 4-D \[batch, heads, seqlen, head_dim\]"):
        fa(t(torch, 4, 8, 64), kv, kv)
    with pytest.raises(ValueError, match="k/v's 3 heads must divide q's 4 heads"):
        fa(q, t(torch, 1, 3, 8, 64), t(torch, 1, 3, 8, 64))
    with pytest.raises(ValueError, match="head_dim 12; legal: a multiple of 8 from 8 to 256"):
        fa(t(torch, 1, 4, 8, 12), t(torch, 1, 2, 8, 12), t(torch, 1, 2, 8, 12))
    with pytest.raises(ValueError, match=r"k \(1, 2, 8, 64\) and v \(1, 2, 9, 64\) must have one shape"):
        fa(q, kv, t(torch, 1, 2, 9, 64))
    with pytest.raises(ValueError, match="must have q's batch"):
        fa(q, t(torch, 2, 2, 8, 64), t(torch, 2, 2, 8, 64))
    with pytest.raises(ValueError, match="scale=0.0; legal: None"):
        fa(q, kv, kv, scale=0.0)
    with pytest.raises(TypeError, match=r"q has dtype torch.float32; legal: torch.float16, torch.bfloat16"):
        fa(q.float(), kv.float(), kv.float())
    with pytest.raises(TypeError, match="v has dtype torch.bfloat16 but q has torch.float16"):
        fa(q, kv, kv.bfloat16())
