"""Where a local model runs and in which precision: one resolver for every entry point.

``--device auto|cpu|cuda|cuda:N`` and ``--dtype auto|float32|bfloat16|float16`` (and the
training configs' ``model.device``/``model.dtype``) all go through :func:`resolve_device`
and :func:`resolve_dtype`, so every command means the same by them and fails the same
clear way (CUDA asked for on a machine without it, a GPU index that does not exist, an
unknown dtype) before any model loads.

- ``auto`` device: the current CUDA device when ``torch.cuda.is_available()``, else CPU;
- ``auto`` dtype: bfloat16 on a CUDA device that supports it natively, else float32
  (float32 on every CPU: bf16 only pays on CPUs with bf16 units, see docs/benchmarks.md);
- the generation batch follows the device: :func:`default_batch_size` rows per forward
  pass (32 on CPU, where more rows only queue; 256 on CUDA, where they run in parallel).

torch is imported only when a name must be checked against the machine.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["CPU_BATCH_SIZE", "CUDA_BATCH_SIZE", "DTYPE_NAMES", "DeviceError", "default_batch_size",
           "describe_device", "resolve_device", "resolve_dtype", "torch_dtype"]

# Rows per forward pass: a CPU gains nothing from more rows than keep its cores busy,
# while a GPU runs a few hundred short rows in about the time of one.
CPU_BATCH_SIZE = 32
CUDA_BATCH_SIZE = 256

# Accepted spellings → canonical names (what is recorded with a run).
DTYPE_NAMES = {"float32": "float32", "fp32": "float32", "float": "float32",
               "bfloat16": "bfloat16", "bf16": "bfloat16",
               "float16": "float16", "fp16": "float16", "half": "float16"}
_CUDA = re.compile(r"cuda(?::(.*))?")


class DeviceError(ValueError):
    """A device or dtype this machine cannot honour; the message says why and what to pass."""


def resolve_device(device: str | None = "auto") -> str:
    """``"cpu"`` or ``"cuda:N"`` for ``"auto"`` (or None), ``"cpu"``, ``"cuda"`` (the
    current CUDA device) or ``"cuda:N"``; anything this machine lacks is a
    :class:`DeviceError`."""
    name = "auto" if device is None else str(device).strip().lower()
    if name == "cpu":
        return "cpu"
    import torch

    if name == "auto":
        return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"
    match = _CUDA.fullmatch(name)
    if match is None:
        raise DeviceError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N")
    index_text = match.group(1)
    if index_text is not None and not index_text.isdigit():
        raise DeviceError(f"bad CUDA device {device!r}: the index after 'cuda:' must be a number (e.g. cuda:0)")
    if not torch.cuda.is_available():
        raise DeviceError(f"{device!r} requested but torch.cuda.is_available() is False "
                          f"(torch {torch.__version__}); use --device cpu or auto")
    if index_text is None:
        return f"cuda:{torch.cuda.current_device()}"
    count = torch.cuda.device_count()
    if int(index_text) >= count:
        raise DeviceError(f"{device!r} requested but only {count} CUDA device(s) are visible "
                          f"(cuda:0{'' if count == 1 else f' … cuda:{count - 1}'})")
    return f"cuda:{int(index_text)}"


def resolve_dtype(dtype: Any, device: str) -> str:
    """The canonical dtype name (``"float32"``, ``"bfloat16"`` or ``"float16"``) for
    ``dtype`` on the resolved ``device``: ``"auto"`` (or None) is bfloat16 on a CUDA
    device with native bf16, else float32; a ``torch.dtype`` is accepted too."""
    if dtype is None or (isinstance(dtype, str) and dtype.strip().lower() == "auto"):
        if not str(device).startswith("cuda"):
            return "float32"
        import torch

        index = int(str(device).partition(":")[2] or torch.cuda.current_device())
        # Native bf16: Ampere (compute capability 8) and later, and every ROCm GPU; older
        # cards only emulate it, slower than float32.
        native = bool(torch.version.hip) or torch.cuda.get_device_properties(index).major >= 8
        return "bfloat16" if native else "float32"
    key = str(dtype).strip().lower().removeprefix("torch.")
    if key not in DTYPE_NAMES:
        raise DeviceError(f"unknown dtype {dtype!r}; use auto, float32, bfloat16 or float16")
    return DTYPE_NAMES[key]


def torch_dtype(name: Any) -> Any:
    """The ``torch.dtype`` of a dtype name (or a ``torch.dtype`` as it is); not ``auto``."""
    import torch

    if isinstance(name, torch.dtype):
        return name
    key = str(name).strip().lower().removeprefix("torch.")
    if key not in DTYPE_NAMES:
        raise DeviceError(f"unknown dtype {name!r}; use float32, bfloat16 or float16")
    return getattr(torch, DTYPE_NAMES[key])


def default_batch_size(device: Any) -> int:
    """Rows per forward pass when none is given: :data:`CUDA_BATCH_SIZE` on a GPU,
    :data:`CPU_BATCH_SIZE` elsewhere."""
    return CUDA_BATCH_SIZE if str(device).startswith("cuda") else CPU_BATCH_SIZE


def describe_device(device: str) -> dict[str, Any]:
    """What a run records about its device: the name, and for a GPU its model and memory."""
    out: dict[str, Any] = {"device": device}
    if str(device).startswith("cuda"):
        import torch

        props = torch.cuda.get_device_properties(torch.device(device))
        out.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1))
    return out
