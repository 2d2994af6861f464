"""FFRR run configuration: one TOML file or a bundled preset (``factrl.presets.ffrr``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from factrl.datasets.prepare import DataSettings
from factrl.train.config import PresetInfo, _build, list_presets, read_config_toml

__all__ = ["FFRRRunConfig", "FFRRSettings", "METHODS", "LEVELS", "RetrieverSettings", "ScorerSettings",
           "list_ffrr_presets", "load_ffrr_config"]

METHODS = ("ffrr", "replug", "frozen")
LEVELS = ("d", "q", "d+q")


@dataclass
class RetrieverSettings:
    index: str = "runs/scifact-dense"  # a frozen dense or hybrid index: D′ per query and the passages
    model: str | None = None  # the encoder to train; None: the index's own model
    max_seq_length: int | None = None  # encoder input cut (None: the model's own)


@dataclass
class ScorerSettings:
    model: str = "smollm2"  # the LM: 'smollm2', a local path, a hub id or 'openai:MODEL'
    base_url: str | None = None  # OpenAI-compatible server (with openai:MODEL)
    form: str = "auto"  # completion | chat | auto (label_scores module doc)
    # gold label → the word the LM chooses; the order is the label set's order in the prompt
    label_words: dict[str, str] = field(default_factory=lambda: {
        "SUPPORT": "true", "REFUTE": "false", "NOT ENOUGH INFO": "unproven"})
    label_field: str = "label"  # "label" (normalised) or "grade" (news_graded's meta["grade"])
    max_doc_chars: int = 1500
    batch_size: int = 8
    # every scored row is appended here and reused by later runs with the same scorer
    # (resume, REPLUG and FFRR side by side); None: OUTPUT_DIR/lm_scores.jsonl
    cache: str | None = None
    # the training reward: "label" (the paper: the gold label's probability given the
    # claim and the documents) or "claim_likelihood" (the LM's mean per-token
    # log-likelihood of the claim after the documents, lm.claim_likelihood; no label
    # involved, so no stopping rule: ffrr.max_samples documents per episode). Held-out
    # labels are always the label scorer's.
    reward: str = "label"
    likelihood_template: str = "Passage: {evidence}\nA claim based on this passage:"


@dataclass
class FFRRSettings:
    method: str = "ffrr"  # ffrr | replug | frozen (no update: the comparison baseline)
    level: str = "d"  # d (document-level, §4.1) | q (question-level, §4.2) | d+q (hybrid, §4.3)
    candidates: int = 20  # |D′|: top candidates per query from the frozen index
    epsilon: float = 0.1  # ε-greedy over documents
    top_k: int = 3  # K: exploit from the top K; K documents at inference
    tau: float = 1.0  # π_θ temperature
    max_samples: int = 20  # documents sampled per document-level episode at most (κ ≤ this)
    question_epsilon: float = 0.1  # ε-greedy over questions (the second controller)
    questions_k: int = 3  # questions picked per question-level episode; top-1 of K at inference
    max_questions: int = 5
    doc_steps_per_question_step: int = 1  # hybrid: document-level steps after each question-level one
    final_reward: bool = True  # add r_g to the reward of the documents used for the final prediction
    baseline: str = "none"  # none (the paper) | mean (subtract the claim's mean reward)
    # β of a KL(π_θ ‖ π_0) penalty to the frozen retriever over D′ (document level; 0: the
    # paper, none): the optimum becomes π_0·exp(R/β), a blend of the retriever and the reward
    kl_coef: float = 0.0
    # "sample": the paper's ε-greedy episodes and REINFORCE on the sampled documents;
    # "exact": −E_{d∼π_θ}[R] over all of D′ (every candidate scored, one document each:
    # no sampling noise, no stopping rule, no final reward; level d only). With kl_coef
    # the optimum is still π_0·exp(R / kl_coef), reached by a deterministic gradient
    estimator: str = "sample"
    replug_docs: int = 20  # REPLUG: top documents in the KL
    replug_beta: float = 1.0  # REPLUG: LM-score temperature
    learning_rate: float = 1e-5
    batch_size: int = 4  # claims per optimiser update
    warmup_ratio: float = 0.1
    epochs: float = 1.0
    max_steps: int | None = None  # optimiser updates; None: epochs over the training claims
    max_minutes: float | None = None  # stop (and save) after this much training time
    doc_grad: bool = True  # gradient through the document side too (policy module doc)
    # "encode": candidates re-encoded by the current weights each step (the paper);
    # "index": the frozen index's document vectors, only the query side is trained (then
    # the trained model encodes queries for that same index; no re-index)
    doc_side: str = "encode"
    # score every training claim's candidates (one document each) before the first update,
    # in LM batches with progress, into scorer.cache; the updates then only score the
    # final-reward sets, so many cheap updates follow one scoring pass
    precompute: bool = False
    # train on claims with these gold labels only (empty: all with a label word), e.g.
    # ["SUPPORT", "REFUTE"] where a NOT ENOUGH INFO claim's gold label ("unproven") would
    # reward documents that say nothing about it
    train_labels: list[str] = field(default_factory=list)
    seed: int = 0


@dataclass
class EvalSettings:
    held_out: bool = True  # evaluate after training
    # the dataset's split evaluated (the paper: RAWFC's and LIAR-RAW's own test splits,
    # read from data.data_dir); None: the held-out part of data.split
    split: str | None = None
    pool_depth: int = 30  # rerank the frozen index's top N with the trained encoder (no corpus re-encode)
    # pool_depth = 0: search a whole index with the trained encoder's queries: eval.index
    # (built with `factrl index build --model OUT/final`), or the frozen index itself when
    # ffrr.doc_side = "index" (its document vectors are the ones trained against)
    index: str | None = None
    label_limit: int | None = None  # label metrics on N evenly spaced held-out claims only (LM time)
    ks: list[int] = field(default_factory=lambda: [10])


@dataclass
class FFRRRunConfig:
    preset: PresetInfo = field(default_factory=PresetInfo)
    data: DataSettings = field(default_factory=DataSettings)
    retriever: RetrieverSettings = field(default_factory=RetrieverSettings)
    scorer: ScorerSettings = field(default_factory=ScorerSettings)
    questions_lm: str | None = None  # LM that decomposes claims (None: the scorer's)
    ffrr: FFRRSettings = field(default_factory=FFRRSettings)
    eval: EvalSettings = field(default_factory=EvalSettings)
    output_dir: str = "runs/ffrr"
    # Where the LM scorer and the trained encoder run: auto (CUDA when available), cpu,
    # cuda or cuda:N; dtype: the LM scorer's weights (auto: bfloat16 on a GPU that has it,
    # else float32). The encoder trains in float32 whatever dtype says.
    device: str = "auto"
    dtype: str = "auto"

    def runtime(self) -> tuple[str, str]:
        """``(device, dtype)`` resolved for this machine (:mod:`factrl.lm.device`)."""
        from factrl.lm.device import resolve_device, resolve_dtype

        device = resolve_device(self.device)
        return device, resolve_dtype(self.dtype, device)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def check(self) -> FFRRRunConfig:
        f = self.ffrr
        if f.method not in METHODS:
            raise ValueError(f"ffrr.method must be one of {', '.join(METHODS)}, got {f.method!r}")
        if f.level not in LEVELS:
            raise ValueError(f"ffrr.level must be one of {', '.join(LEVELS)}, got {f.level!r}")
        if f.baseline not in ("none", "mean"):
            raise ValueError(f"ffrr.baseline must be 'none' or 'mean', got {f.baseline!r}")
        if not 0 <= f.epsilon <= 1 or not 0 <= f.question_epsilon <= 1:
            raise ValueError("ffrr.epsilon and ffrr.question_epsilon must be in [0, 1]")
        if f.top_k < 1 or f.candidates < f.top_k:
            raise ValueError(f"need 1 <= ffrr.top_k <= ffrr.candidates, got {f.top_k} and {f.candidates}")
        if f.kl_coef < 0:
            raise ValueError(f"ffrr.kl_coef must be >= 0, got {f.kl_coef}")
        if f.batch_size < 1 or f.learning_rate <= 0 or f.tau <= 0:
            raise ValueError("ffrr.batch_size, ffrr.learning_rate and ffrr.tau must be positive")
        if not 0 <= f.warmup_ratio < 1:
            raise ValueError(f"ffrr.warmup_ratio must be in [0, 1), got {f.warmup_ratio}")
        if f.estimator not in ("sample", "exact"):
            raise ValueError(f"ffrr.estimator must be 'sample' or 'exact', got {f.estimator!r}")
        if f.estimator == "exact" and f.method == "ffrr" and (f.level != "d" or f.final_reward):
            raise ValueError("ffrr.estimator = 'exact' scores every candidate alone: it needs ffrr.level = 'd' "
                             "and ffrr.final_reward = false")
        if f.doc_side not in ("encode", "index"):
            raise ValueError(f"ffrr.doc_side must be 'encode' or 'index', got {f.doc_side!r}")
        if self.scorer.reward not in ("label", "claim_likelihood"):
            raise ValueError(f"scorer.reward must be 'label' or 'claim_likelihood', got {self.scorer.reward!r}")
        if self.scorer.label_field not in ("label", "grade"):
            raise ValueError(f"scorer.label_field must be 'label' or 'grade', got {self.scorer.label_field!r}")
        if len(self.scorer.label_words) < 2:
            raise ValueError("scorer.label_words needs at least two labels")
        return self


def list_ffrr_presets() -> list[str]:
    return list_presets("factrl.presets.ffrr")


def load_ffrr_config(source: str | Path, overrides: dict[str, Any] | None = None) -> FFRRRunConfig:
    """Read a TOML file or a bundled FFRR preset; ``overrides`` maps dotted keys to values."""
    data, where = read_config_toml(source, overrides, package="factrl.presets.ffrr", kind="FFRR ")
    return _build(FFRRRunConfig, data, where).check()
