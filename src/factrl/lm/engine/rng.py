"""A counter-based random stream: one uniform per (row seed, token index).

Both decoding paths draw a row's ``k``-th sample from ``uniform(seed, k)`` — the eager
path in Python, the engine on the device as int64 tensor arithmetic — so a seeded row
samples the same tokens on either path, whatever batch it shares and whenever other rows
finish. The mixer is SplitMix64's finaliser over ``(seed + 1) * A + k * B`` (mod 2**64);
the top 53 bits become a double in [0, 1).
"""

from __future__ import annotations

from typing import Any

__all__ = ["uniform", "uniform_tensor"]

_MASK = (1 << 64) - 1
_A = 0x9E3779B97F4A7C15
_B = 0xD1B54A32D192ED03
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def uniform(seed: int, index: int) -> float:
    """The uniform in [0, 1) of draw ``index`` of the stream ``seed``."""
    z = ((seed + 1) * _A + index * _B) & _MASK
    z = ((z ^ (z >> 30)) * _M1) & _MASK
    z = ((z ^ (z >> 27)) * _M2) & _MASK
    z ^= z >> 31
    return (z >> 11) * (1.0 / (1 << 53))


def _shr(z: Any, k: int) -> Any:
    """Logical right shift of int64 tensors (torch's ``>>`` is arithmetic)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def uniform_tensor(seed: Any, index: Any) -> Any:
    """:func:`uniform` elementwise over int64 tensors (wrapping multiplication); float64."""
    import torch

    z = (seed + 1) * _signed(_A) + index * _signed(_B)
    z = (z ^ _shr(z, 30)) * _signed(_M1)
    z = (z ^ _shr(z, 27)) * _signed(_M2)
    z = z ^ _shr(z, 31)
    return _shr(z, 11).to(torch.float64) * (1.0 / (1 << 53))
