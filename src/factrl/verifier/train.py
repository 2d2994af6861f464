"""Training the verifier: resumable, time-budgeted, on one CPU core if need be.

``train_verifier(config, out_dir)``:

1. builds the pairs of every source (:mod:`factrl.verifier.sources`) with their splits and
   writes ``data.json`` (counts per source, split and label; a SHA-256 of each source's
   held-out claim ids); the held-out split is never read here;
2. trains the delta (:mod:`factrl.verifier.model`) with AdamW, linear warm-up and decay,
   cross-entropy weighted by 1/sqrt(class frequency), on length-bucketed batches in a
   seeded order, so a resumed run sees exactly the batches an uninterrupted one would;
3. checkpoints (``checkpoint.pt``: delta, optimiser, scheduler, step; written atomically)
   every ``save_minutes`` and when ``max_minutes`` is spent, and resumes from it when the
   configuration and the data are the same (refused otherwise, naming what changed);
4. when the planned steps are done, fits the temperature and the decision thresholds on
   the validation split and writes ``final/`` (``delta.safetensors`` + ``verifier.json``:
   architecture, calibration, validation metrics, data summary).

Progress lines go to ``log`` every ``log_seconds``; ``progress.jsonl`` keeps them.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from factrl.verifier.pairs import SPLITS, VERIFIER_LABELS, Pair, SplitFractions, build_pairs, label_counts

__all__ = ["DEFAULT_SOURCES", "FINAL_DIR", "TrainOutcome", "VerifierTrainConfig", "data_summary", "finalize",
           "train_verifier", "validation_logits"]

DEFAULT_SOURCES = ("scifact", "climate_fever", "feverous_s", "averitec", "veri_r1_offline")
CHECKPOINT = "checkpoint.pt"
FINAL_DIR = "final"
DELTA_FILE = "delta.safetensors"
INFO_FILE = "verifier.json"
# Settings that may change between a run and its resumption (they do not change the result).
_RESUMABLE = ("max_minutes", "save_minutes", "log_seconds", "threads", "data_dir")


@dataclass(frozen=True)
class VerifierTrainConfig:
    data_dir: str = "../shared/data"
    sources: tuple[str, ...] = DEFAULT_SOURCES
    held_out: float = 0.2
    validation: float = 0.1
    split_seed: int = 0
    seed: int = 0
    base: str = "all-MiniLM-L6-v2"  # the embedded encoder, or a local folder (tests: a tiny random one)
    lora_r: int = 16
    lora_alpha: float = 32.0
    max_length: int = 128
    layers: int | None = None  # the base's first N blocks only (a shallower, faster verifier); None: all
    learning_rate: float = 1e-3
    weight_decay: float = 0.01
    batch_size: int = 16
    epochs: float = 1.0
    warmup_ratio: float = 0.06
    class_weighting: str = "sqrt"  # or "none"
    max_train_pairs: int | None = None  # a seeded subset (smoke runs and tests)
    repeat: dict[str, int] = field(default_factory=dict)  # source -> times its training pairs appear an epoch
    init_from: str | None = None  # start from a trained delta (a run's final/ folder): continued training
    # distillation: a trained verifier (a name such as factrl-verifier, an asset or a run's
    # final/ folder) whose logits at distill_temperature the loss also matches, weighted
    # distill_weight against the labels' cross-entropy (a shallower student keeps its teacher's reading)
    teacher: str | None = None
    distill_weight: float = 0.5
    distill_temperature: float = 2.0
    max_minutes: float | None = None
    save_minutes: float = 5.0
    log_seconds: float = 30.0
    threads: int = 1

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.epochs <= 0 or self.learning_rate <= 0:
            raise ValueError("batch_size >= 1, epochs > 0 and learning_rate > 0 are required")
        if self.class_weighting not in ("sqrt", "none"):
            raise ValueError(f"class_weighting must be 'sqrt' or 'none', got {self.class_weighting!r}")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise ValueError(f"max_minutes must be > 0, got {self.max_minutes}")
        if not self.sources:
            raise ValueError("at least one pair source is needed")
        if not 0.0 <= self.distill_weight <= 1.0 or self.distill_temperature <= 0:
            raise ValueError(f"distill_weight must be in [0, 1] and distill_temperature > 0, got "
                             f"{self.distill_weight} and {self.distill_temperature}")
        self.model_config()  # the architecture's own checks (lora_r, max_length, layers)
        bad = {k: v for k, v in self.repeat.items() if not isinstance(v, int) or isinstance(v, bool) or v < 1}
        if bad:
            raise ValueError(f"repeat factors must be integers >= 1, got {bad}")
        SplitFractions(self.held_out, self.validation, self.split_seed)

    @property
    def fractions(self) -> SplitFractions:
        return SplitFractions(self.held_out, self.validation, self.split_seed)

    def model_config(self) -> Any:
        from factrl.verifier.model import CrossEncoderConfig

        return CrossEncoderConfig(base=self.base, lora_r=self.lora_r, lora_alpha=self.lora_alpha,
                                  max_length=self.max_length, layers=self.layers)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["sources"] = list(self.sources)
        d["repeat"] = dict(self.repeat)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VerifierTrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown verifier training setting(s): {', '.join(unknown)}")
        return cls(**{**d, **({"sources": tuple(d["sources"])} if "sources" in d else {})})


@dataclass
class TrainOutcome:
    status: str  # "done" (final/ written) or "budget" (stopped at max_minutes; resume to go on)
    step: int
    total_steps: int
    final_dir: Path | None = None
    info: dict[str, Any] = field(default_factory=dict)


def data_summary(pairs: Sequence[Pair], config: VerifierTrainConfig) -> dict[str, Any]:
    """Counts per source, split and label, and a SHA-256 of each source's held-out claim
    ids (sorted, newline-joined), for the manifest."""
    out: dict[str, Any] = {"data_dir": config.data_dir, "held_out_fraction": config.held_out,
                           "validation_fraction": config.validation, "split_seed": config.split_seed,
                           "sources": {}}
    for source in sorted({p.source for p in pairs}):
        mine = [p for p in pairs if p.source == source]
        held = sorted({p.claim_id for p in mine if p.split == "held_out"})
        out["sources"][source] = {
            "pairs": {s: label_counts(p for p in mine if p.split == s) for s in SPLITS},
            "claims": {s: len({p.claim_id for p in mine if p.split == s}) for s in SPLITS},
            "kinds": sorted({p.kind for p in mine}),
            "held_out_ids_sha256": hashlib.sha256("\n".join(held).encode()).hexdigest(),
        }
    return out


def _fingerprint(pairs: Sequence[Pair]) -> str:
    h = hashlib.sha256()
    for p in pairs:
        h.update(f"{p.source}\x00{p.claim}\x00{p.evidence}\x00{p.label.value}\x00{p.split}\n".encode())
    return h.hexdigest()


def _epoch_batches(lengths: Sequence[int], batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """The batches of one epoch: a seeded shuffle, sorted by length within windows of 50
    batches (little padding), the batches themselves shuffled."""
    rng = random.Random(f"{seed}:{epoch}")
    order = list(range(len(lengths)))
    rng.shuffle(order)
    window = batch_size * 50
    batches: list[list[int]] = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window], key=lambda i: lengths[i])
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


def _tensors(batch: Sequence[int], enc: dict[str, list[list[int]]], pad: int) -> dict[str, Any]:
    import torch

    longest = max(len(enc["input_ids"][i]) for i in batch)
    x = torch.full((len(batch), longest), pad, dtype=torch.long)
    m = torch.zeros_like(x)
    t = torch.zeros_like(x)
    for row, i in enumerate(batch):
        ids = enc["input_ids"][i]
        x[row, : len(ids)] = torch.tensor(ids)
        m[row, : len(ids)] = 1
        if "token_type_ids" in enc:
            t[row, : len(ids)] = torch.tensor(enc["token_type_ids"][i])
    return {"input_ids": x, "attention_mask": m, "token_type_ids": t}


def _class_weights(targets: Sequence[int], mode: str) -> list[float]:
    counts = np.bincount(np.asarray(targets, dtype=np.int64), minlength=len(VERIFIER_LABELS)).astype(np.float64)
    if mode == "none":
        return [1.0] * len(counts)
    w = 1.0 / np.sqrt(np.maximum(counts, 1.0))
    return (w / (w * counts).sum() * counts.sum()).tolist()


def _teacher_logits(config: VerifierTrainConfig, train: Sequence[Pair], log: Callable[[str], None]) -> np.ndarray:
    """The teacher's logits for each training pair (fp32, each distinct pair scored once)."""
    from factrl.verifier.asset import load_verifier

    teacher = load_verifier(str(config.teacher), precision="fp32")
    distinct = list(dict.fromkeys((p.claim, p.evidence) for p in train))
    log(f"[factrl verifier] scoring {len(distinct)} distinct training pairs with the teacher {config.teacher}")
    started = time.monotonic()
    logits = teacher.logits([c for c, _ in distinct], [e for _, e in distinct])
    log(f"[factrl verifier] teacher done in {time.monotonic() - started:.0f}s")
    row = {pair: i for i, pair in enumerate(distinct)}
    return np.asarray(logits, dtype=np.float32)[[row[(p.claim, p.evidence)] for p in train]]


def _distill_loss(student: Any, teacher: Any, temperature: float) -> Any:
    """KL(teacher ‖ student) of the temperature-softened distributions, times T² (the
    gradient's scale then matches the labels' cross-entropy)."""
    import torch.nn.functional as F

    t = temperature
    return F.kl_div(F.log_softmax(student / t, -1), F.log_softmax(teacher / t, -1), log_target=True,
                    reduction="batchmean") * t * t


def _atomic_save(obj: Any, path: Path) -> None:
    import torch

    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def validation_logits(model: Any, tokenizer: Any, pairs: Sequence[Pair], max_length: int) -> np.ndarray:
    """The model's logits on ``pairs`` (eval mode, no gradients), in order."""
    from factrl.verifier.scoring import CrossEncoderVerifier

    was_training = model.training
    model.eval()
    try:
        scorer = CrossEncoderVerifier(model, tokenizer, max_length=max_length, precision="fp32")  # never cast the trained model
        return scorer.logits([p.claim for p in pairs], [p.evidence for p in pairs])
    finally:
        model.train(was_training)


def finalize(model: Any, tokenizer: Any, pairs: Sequence[Pair], config: VerifierTrainConfig, out_dir: Path,
             extra: dict[str, Any]) -> Path:
    """Calibrate on the validation split and write ``final/``."""
    from safetensors.torch import save_file

    from factrl.verifier.calibration import best_threshold, fit_temperature, pair_metrics
    from factrl.verifier.model import delta_state
    from factrl.verifier.scoring import softmax

    val = [p for p in pairs if p.split == "validation"]
    logits = validation_logits(model, tokenizer, val, config.max_length)
    targets = [p.target for p in val]
    temperature = fit_temperature(logits, targets)
    probs = softmax(logits, temperature)
    thresholds = {"support": best_threshold(probs[:, 0], [t == 0 for t in targets]),
                  "refute": best_threshold(probs[:, 1], [t == 1 for t in targets])}
    by_source = {s: pair_metrics(probs[[i for i, p in enumerate(val) if p.source == s]],
                                 [p.target for p in val if p.source == s]) for s in sorted({p.source for p in val})}
    final = out_dir / FINAL_DIR
    final.mkdir(parents=True, exist_ok=True)
    save_file(delta_state(model), str(final / DELTA_FILE))
    info = {
        "architecture": config.model_config().to_dict(),
        "labels": [label.value for label in VERIFIER_LABELS],
        "temperature": temperature,
        "thresholds": thresholds,
        "validation": {"all": pair_metrics(probs, targets), "by_source": by_source,
                       "nll_uncalibrated": float(_nll(logits, targets, 1.0)),
                       "nll_calibrated": float(_nll(logits, targets, temperature))},
        "training": {**config.to_dict(), **extra},
        "data": data_summary(pairs, config),
    }
    (final / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n")
    return final


def _nll(logits: np.ndarray, targets: Sequence[int], t: float) -> float:
    from factrl.verifier.calibration import nll

    return nll(logits, targets, t) if len(targets) else float("nan")


def train_verifier(config: VerifierTrainConfig, out_dir: Path | str, *,
                   log: Callable[[str], None] = print, pairs: Sequence[Pair] | None = None,
                   finish: bool = False) -> TrainOutcome:
    """Train (or resume) in ``out_dir``; see the module doc. ``pairs`` replaces the built
    pairs (tests). ``finish``: take no more steps: calibrate what the checkpoint holds and
    write ``final/`` now (a run whose planned steps will not fit the time there is; the
    info records the steps done against those planned)."""
    import torch

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(max(1, int(config.threads)))
    started = time.monotonic()
    if pairs is None:
        pairs = build_pairs(config.data_dir, config.sources, config.fractions, log=log)
    pairs = list(pairs)
    train = [p for p in pairs if p.split == "train"]
    if config.max_train_pairs is not None:
        train = random.Random(config.seed).sample(train, min(config.max_train_pairs, len(train)))
    train = [p for p in train for _ in range(config.repeat.get(p.source, 1))]
    if not train:
        raise ValueError("no training pairs (every group fell in validation or held_out?)")
    fingerprint = _fingerprint(pairs) + ":" + _fingerprint(train)
    (out_dir / "data.json").write_text(json.dumps(data_summary(pairs, config), indent=2) + "\n")

    from factrl.verifier.model import build_cross_encoder, delta_for_blocks, load_delta

    model, tokenizer = build_cross_encoder(config.model_config())
    if config.init_from:
        from safetensors.torch import load_file

        load_delta(model, delta_for_blocks(load_file(str(Path(config.init_from) / DELTA_FILE)), config.layers))
        log(f"[factrl verifier] starting from the delta in {config.init_from}")
    enc = tokenizer([p.claim for p in train], [p.evidence for p in train], truncation="longest_first",
                    max_length=config.max_length)
    enc = {k: enc[k] for k in ("input_ids", "token_type_ids") if k in enc}
    lengths = [len(x) for x in enc["input_ids"]]
    targets = [p.target for p in train]
    soft = _teacher_logits(config, train, log) if config.teacher else None
    if soft is not None:  # a teacher that changed under its name (a new shipped delta) is other data
        fingerprint += ":teacher:" + hashlib.sha256((np.round(soft, 3) + 0.0).tobytes()).hexdigest()
    per_epoch = math.ceil(len(train) / config.batch_size)
    total = max(1, math.ceil(per_epoch * config.epochs))
    warmup = int(total * config.warmup_ratio)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / max(1, warmup) if s < warmup else max(0.0, (total - s) / max(1, total - warmup)))
    loss_fn = torch.nn.CrossEntropyLoss(weight=torch.tensor(_class_weights(targets, config.class_weighting)))

    step, loss_ema, seen_before = 0, None, 0
    ckpt = out_dir / CHECKPOINT
    if ckpt.is_file():
        state = torch.load(ckpt, map_location="cpu", weights_only=True)
        # A setting added since the checkpoint was written reads as its default.
        saved = {k: v for k, v in {**VerifierTrainConfig().to_dict(), **state["config"]}.items() if k not in _RESUMABLE}
        now = {k: v for k, v in config.to_dict().items() if k not in _RESUMABLE}
        if saved != now:
            changed = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
            raise ValueError(f"{ckpt} was written with other settings ({', '.join(changed)}); "
                             "use another --out or the same settings")
        if state["fingerprint"] != fingerprint:
            raise ValueError(f"{ckpt} was trained on other data (the pairs or the teacher's logits changed); "
                             "use another --out")
        load_delta(model, state["delta"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        step, loss_ema, seen_before = int(state["step"]), state.get("loss_ema"), float(state.get("seconds", 0.0))
        log(f"[factrl verifier] resumed at step {step}/{total} from {ckpt}")

    def save() -> None:
        from factrl.verifier.model import delta_state

        _atomic_save({"delta": delta_state(model), "optimizer": optimizer.state_dict(),
                      "scheduler": scheduler.state_dict(), "step": step, "config": config.to_dict(),
                      "fingerprint": fingerprint, "loss_ema": loss_ema,
                      "seconds": seen_before + time.monotonic() - started}, ckpt)

    log(f"[factrl verifier] {len(train)} training pairs, {per_epoch} steps an epoch, {total} steps planned "
        f"(batch {config.batch_size}, max length {config.max_length}, {len(params)} trainable tensors, "
        f"{sum(p.numel() for p in params):,} parameters)")
    progress = (out_dir / "progress.jsonl").open("a", encoding="utf-8")
    model.train()
    last_log = last_save = time.monotonic()
    pairs_done = 0
    epoch_cache: dict[int, list[list[int]]] = {}
    status = "done"
    try:
        while step < total and not finish:
            if config.max_minutes is not None and time.monotonic() - started > config.max_minutes * 60:
                status = "budget"
                break
            epoch, index = divmod(step, per_epoch)
            if epoch not in epoch_cache:
                epoch_cache = {epoch: _epoch_batches(lengths, config.batch_size, config.seed, epoch)}
            batch = epoch_cache[epoch][index]
            torch.manual_seed(config.seed * 1_000_003 + step)  # dropout: the same on resumption
            logits = model(**_tensors(batch, enc, int(tokenizer.pad_token_id or 0)))
            loss = loss_fn(logits, torch.tensor([targets[i] for i in batch]))
            if soft is not None:
                loss = (1 - config.distill_weight) * loss + config.distill_weight * _distill_loss(
                    logits, torch.from_numpy(soft[batch]), config.distill_temperature)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            scheduler.step()
            step += 1
            pairs_done += len(batch)
            value = float(loss.detach())
            loss_ema = value if loss_ema is None else 0.98 * loss_ema + 0.02 * value
            now = time.monotonic()
            if now - last_log >= config.log_seconds or step == total:
                rate = pairs_done / max(now - started, 1e-9)
                eta = (total - step) * config.batch_size / max(rate, 1e-9) / 60
                row = {"step": step, "total": total, "epoch": step / per_epoch, "loss_ema": loss_ema,
                       "lr": scheduler.get_last_lr()[0], "pairs_per_s": rate,
                       "minutes": (seen_before + now - started) / 60}
                progress.write(json.dumps(row) + "\n")
                progress.flush()
                log(f"[factrl verifier] step {step}/{total} epoch {step / per_epoch:.2f} loss {loss_ema:.4f} "
                    f"{rate:.1f} pairs/s, ~{eta:.0f} min to go")
                last_log = now
            if now - last_save >= config.save_minutes * 60:
                save()
                last_save = now
    finally:
        progress.close()
    save()
    if status == "budget":
        log(f"[factrl verifier] time budget spent at step {step}/{total}; checkpoint {ckpt} (run again to resume)")
        return TrainOutcome("budget", step, total)
    if step < total:
        log(f"[factrl verifier] finishing early at step {step}/{total}; calibrating on the validation split")
    else:
        log("[factrl verifier] training done; calibrating on the validation split")
    final = finalize(model, tokenizer, pairs, config, out_dir,
                     {"steps": step, "planned_steps": total, "finished_early": step < total,
                      "train_pairs_used": len(train), "loss_ema": loss_ema,
                      "train_minutes": (seen_before + time.monotonic() - started) / 60})
    info = json.loads((final / INFO_FILE).read_text())
    v = info["validation"]["all"]
    log(f"[factrl verifier] validation: macro-F1 {v['macro_f1']:.3f}, accuracy {v['accuracy']:.3f}, "
        f"contradiction ROC AUC {v['contradiction_roc_auc']}, temperature {info['temperature']:.3f}; wrote {final}")
    return TrainOutcome("done", step, total, final, info)
