"""Score only the completion tokens in TRL's fused LM head on the CPU.

TRL 1.16's GRPO trainer computes per-token log-probabilities through a fused, chunked LM
head (``trl.trainer.utils.add_fused_lm_head``). On CUDA it projects only the positions
that carry a label (the completion tokens); everywhere else it projects *every* position,
prompt and padding included, so that a compiler on a fixed-shape device (Neuron) sees the
same tile shapes each batch. On the CPU that choice only costs: the projection onto the
49k-token vocabulary, and its recomputation and float32 gradient GEMM in the backward,
then run over the whole prompt. In the slow learning test's recipe (prompts of ~300
tokens, completions of ~60) that head was 40 % of a GRPO step (py-spy,
docs/benchmarks.md).

:func:`compact_lm_head` makes the CPU take the compact path: TRL's own code, gathering the
labelled positions before the projection and scattering the results back, which gives
the same log-probabilities and gradients (a test checks them against the padded path).
Only TRL's choice of path changes (its ``_use_triton`` as ``trl.trainer.utils`` sees it);
the kernels still run in torch on the CPU. It is a no-op, reported as ``False``, on a TRL
without that seam.
"""

from __future__ import annotations

from typing import Any

__all__ = ["compact_lm_head", "lm_head_is_compact"]

_MARK = "_factrl_compact_cpu"


def compact_lm_head() -> bool:
    """Make TRL's fused LM head score only labelled positions on the CPU too (idempotent);
    returns whether it now does."""
    try:
        from trl.trainer import utils
    except ImportError:
        return False
    chooser = getattr(utils, "_use_triton", None)
    if chooser is None or not callable(chooser):
        return False
    if getattr(chooser, _MARK, False):
        return True

    def use_compact(device: Any) -> bool:
        return getattr(device, "type", None) == "cpu" or bool(chooser(device))

    setattr(use_compact, _MARK, True)
    use_compact.__wrapped__ = chooser  # type: ignore[attr-defined]  # TRL's own choice
    utils._use_triton = use_compact
    return True


def lm_head_is_compact() -> bool:
    """Whether :func:`compact_lm_head` is in effect in this process."""
    try:
        from trl.trainer import utils
    except ImportError:
        return False
    return bool(getattr(getattr(utils, "_use_triton", None), _MARK, False))
