"""The trained embedded agent: one LoRA adapter on the embedded SmolLM2, shipped in
``factrl/assets/agent/``.

The folder holds a PEFT-format adapter (``adapter_config.json`` +
``adapter_model.safetensors``, so ``peft`` can load it too) and ``manifest.json``: how it
was trained (commands, seed, data), its held-out metrics and the adapter file's SHA-256.
:func:`ensure_agent_model` checks the checksum, merges the adapter into the cached
embedded model (W += B·A·alpha/r, no ``peft`` needed) and caches the merged copy under
``$FACTRL_CACHE/models/factrl-agent-<sha12>/``, so later loads read a plain
``save_pretrained`` folder like any other model (trainers and the LM server included).

:func:`export_adapter` writes such an adapter from any fine-tuned copy of a base model:
the difference of every targeted linear layer's weight, truncated to rank ``r`` by SVD
(exact when the fine-tuning was LoRA of rank ≤ r), with the share of the difference kept
and any change outside those layers reported, never dropped silently.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib.resources import files
from pathlib import Path
from typing import Any

__all__ = [
    "AGENT_ALIASES",
    "ADAPTER_FILE",
    "AGENT_NAME",
    "TARGET_MODULES",
    "AgentAssetError",
    "agent_asset_dir",
    "agent_manifest",
    "ensure_agent_model",
    "export_adapter",
    "file_sha256",
    "merge_adapter",
]

AGENT_NAME = "factrl-agent"
# Model names that load the shipped agent (factrl.lm.loader resolves them).
AGENT_ALIASES = frozenset({"factrl-agent", "agent"})
ADAPTER_FILE = "adapter_model.safetensors"
CONFIG_FILE = "adapter_config.json"
MANIFEST_FILE = "manifest.json"
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
_PREFIX = "base_model.model."


class AgentAssetError(RuntimeError):
    """The shipped adapter is missing, corrupt or does not fit the base model."""


def agent_asset_dir() -> Path:
    """The adapter folder inside the installed package (``FACTRL_AGENT_DIR`` overrides it)."""
    env = os.environ.get("FACTRL_AGENT_DIR")
    return Path(env) if env else Path(str(files("factrl") / "assets" / "agent"))


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def agent_manifest(asset_dir: Path | None = None) -> dict[str, Any]:
    """The manifest, after checking that the adapter file matches its checksum."""
    d = asset_dir or agent_asset_dir()
    manifest_path, adapter = d / MANIFEST_FILE, d / ADAPTER_FILE
    if not manifest_path.is_file() or not adapter.is_file() or not (d / CONFIG_FILE).is_file():
        raise AgentAssetError(
            f"the trained agent's adapter is not installed in {d} (need {ADAPTER_FILE}, {CONFIG_FILE} and "
            f"{MANIFEST_FILE}); reinstall factrl, or use --model smollm2-base for the untrained model")
    manifest = json.loads(manifest_path.read_text())
    got = file_sha256(adapter)
    if got != manifest.get("sha256"):
        raise AgentAssetError(f"{adapter} has SHA-256 {got}, the manifest says {manifest.get('sha256')}: "
                              "the file is corrupt or was replaced; reinstall factrl")
    return manifest


def agent_params(model: str, agent: str, asset_dir: Path | None = None) -> dict[str, Any]:
    """The environment parameters the shipped agent was trained with (its manifest's
    ``agent.params``, e.g. the short prompt) when ``model`` names it and ``agent`` is the
    environment it was trained for; ``{}`` otherwise. Callers use them as defaults, so an
    explicit ``--param`` still wins."""
    if not isinstance(model, str) or model.strip().lower() not in AGENT_ALIASES:
        return {}
    spec = agent_manifest(asset_dir).get("agent") or {}
    if spec.get("name") != agent:
        return {}
    return dict(spec.get("params") or {})


def agent_context_sentences(model: str, agent: str, asset_dir: Path | None = None) -> int | None:
    """The offline context size (sentences of the cited documents) the shipped agent was
    trained with (its manifest's ``agent.context_sentences``) when ``model`` names it and
    ``agent`` is its environment; None otherwise."""
    if not isinstance(model, str) or model.strip().lower() not in AGENT_ALIASES:
        return None
    spec = agent_manifest(asset_dir).get("agent") or {}
    value = spec.get("context_sentences")
    return int(value) if spec.get("name") == agent and value else None


def merge_adapter(model: Any, adapter_dir: Path) -> int:
    """Add the LoRA product of ``adapter_dir`` into ``model``'s weights in place; returns
    the number of layers changed. Every adapter tensor must find its layer."""
    import torch
    from safetensors.torch import load_file

    config = json.loads((adapter_dir / CONFIG_FILE).read_text())
    scale = float(config["lora_alpha"]) / float(config["r"])
    tensors = load_file(str(adapter_dir / ADAPTER_FILE))
    params = dict(model.named_parameters())
    merged = 0
    for key in sorted(k for k in tensors if k.endswith(".lora_A.weight")):
        module = key[: -len(".lora_A.weight")]
        name = (module[len(_PREFIX):] if module.startswith(_PREFIX) else module) + ".weight"
        b_key = module + ".lora_B.weight"
        if name not in params or b_key not in tensors:
            raise AgentAssetError(f"adapter tensor {key} has no matching layer {name} (or no lora_B) in the model")
        w = params[name]
        a, b = tensors[key].to(torch.float32), tensors[b_key].to(torch.float32)
        if (b.shape[0], a.shape[1]) != tuple(w.shape):
            raise AgentAssetError(f"adapter {module}: B·A is {b.shape[0]}x{a.shape[1]}, the layer is {tuple(w.shape)}")
        with torch.no_grad():
            w.add_((b @ a).to(w.dtype), alpha=scale)
        merged += 1
    if not merged:
        raise AgentAssetError(f"{adapter_dir / ADAPTER_FILE} holds no LoRA tensors")
    return merged


def _is_complete(directory: Path) -> bool:
    return (directory / "config.json").is_file() and any(directory.glob("*.safetensors"))


def ensure_agent_model(asset_dir: Path | None = None) -> Path:
    """The cached merged model of the shipped agent (merged on first use, atomically)."""
    from factrl.lm.embedded import cache_root, ensure_embedded_model, publish_dir

    d = asset_dir or agent_asset_dir()
    manifest = agent_manifest(d)
    target = cache_root() / "models" / f"{AGENT_NAME}-{manifest['sha256'][:12]}"
    if _is_complete(target):
        return target
    base = ensure_embedded_model()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(base))
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    merge_adapter(model, d)

    def fill(tmp: Path) -> None:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "factrl_agent.json").write_text(json.dumps({"adapter_sha256": manifest["sha256"]}) + "\n")

    return publish_dir(target, fill, _is_complete)


def export_adapter(model_dir: Path, base_dir: Path, out_dir: Path, *, rank: int = 16,
                   target_modules: tuple[str, ...] = TARGET_MODULES, dtype: str = "bfloat16",
                   tolerance: float = 1e-6, device: str = "cpu") -> dict[str, Any]:
    """Write ``model_dir − base_dir`` as one rank-``rank`` LoRA adapter in ``out_dir``.

    ``dtype`` is the stored adapter's; the differences and their SVDs are float32 on
    ``device`` (a resolved name, e.g. ``"cuda:0"``: much faster for large models).

    Returns a report: layers exported, the share of the weight difference's squared
    Frobenius norm the truncation kept, and the parameters outside ``target_modules`` that
    differ from the base by more than ``tolerance`` (which an adapter cannot carry).
    """
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    tuned = dict(AutoModelForCausalLM.from_pretrained(str(model_dir)).named_parameters())
    base = dict(AutoModelForCausalLM.from_pretrained(str(base_dir)).named_parameters())
    if tuned.keys() != base.keys():
        raise ValueError(f"{model_dir} and {base_dir} are not the same architecture")
    torch_dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[dtype]
    tensors: dict[str, Any] = {}
    total = kept = 0.0
    not_carried: dict[str, float] = {}
    for name, w in tuned.items():
        delta = (w.detach().to(device) - base[name].detach().to(device)).to(torch.float32)
        module = name[: -len(".weight")] if name.endswith(".weight") else name
        if not module.split(".")[-1] in target_modules:
            change = float(delta.abs().max())
            if change > tolerance:
                not_carried[name] = change
            continue
        u, s, vh = torch.linalg.svd(delta, full_matrices=False)
        r = min(rank, s.numel())
        total += float((s ** 2).sum())
        kept += float((s[:r] ** 2).sum())
        root = s[:r].sqrt()
        # B·A·(alpha/r) with alpha = r: B = U·sqrt(S), A = sqrt(S)·Vh.
        tensors[f"{_PREFIX}{module}.lora_B.weight"] = (u[:, :r] * root).to(torch_dtype).cpu().contiguous()
        tensors[f"{_PREFIX}{module}.lora_A.weight"] = (root[:, None] * vh[:r]).to(torch_dtype).cpu().contiguous()
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out_dir / ADAPTER_FILE))
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": rank, "lora_dropout": 0.0,
              "target_modules": list(target_modules), "bias": "none", "fan_in_fan_out": False,
              "base_model_name_or_path": "HuggingFaceTB/SmolLM2-135M-Instruct", "inference_mode": True}
    (out_dir / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    return {"layers": len(tensors) // 2, "rank": rank, "dtype": dtype, "device": device,
            "energy_kept": kept / total if total else 1.0, "not_carried": not_carried,
            "bytes": (out_dir / ADAPTER_FILE).stat().st_size, "sha256": file_sha256(out_dir / ADAPTER_FILE)}
