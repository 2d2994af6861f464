"""The embedded agent's recipe settings: its data sources, indexes, the agent it trains
and every option that shapes the shipped adapter (``factrl train embedded-agent``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factrl.envs import EnvSpec

__all__ = ["AGENT", "CONTEXT_SENTENCES", "DEFAULT_INDEX", "INDEX_COMMANDS", "SOURCES", "STAGES",
           "EmbeddedAgentSettings", "COMMAND"]

# The command that runs this recipe (the shipped manifest's commands start with it).
COMMAND = "factrl train embedded-agent"
STAGES = ("split", "teach", "sft", "grpo", "eval", "ship", "table", "probe")
# The environment the agent is taught, evaluated and shipped for: the recipe is
# Veri-R1's (its template teacher, the veri_r1_offline_cpu preset).
AGENT = "veri_r1"
SOURCES: dict[str, tuple[str, str, str, float]] = {
    # name: (dataset, data path, split, held-out fraction)
    "scifact": ("scifact", "../shared/data/scifact", "train", 0.075),
    "feverous_s": ("feverous_s", "../shared/data/feverous_s/dev.json", "dev", 0.02),
    "climate_fever": ("climate_fever", "../shared/data/climate_fever/climate-fever.jsonl", "dev", 0.04),
}
DEFAULT_INDEX = {"scifact": "runs/scifact-index", "feverous_s": "runs/bench3/feverous_s-index",
                 "climate_fever": "runs/bench3/climate_fever-index"}
CONTEXT_SENTENCES = 6
# The indexes the recipe reads (the manifest's first commands).
INDEX_COMMANDS = [
    "factrl index build --corpus ../shared/data/scifact/corpus.jsonl --corpus-format scifact --out runs/scifact-index",
    "factrl corpus pool --dataset feverous_s --data-dir ../shared/data/feverous_s/dev.json --split dev "
    "--out runs/bench3/feverous_s-pool.jsonl",
    "factrl index build --corpus runs/bench3/feverous_s-pool.jsonl --out runs/bench3/feverous_s-index",
    "factrl corpus pool --dataset climate_fever --data-dir ../shared/data/climate_fever/climate-fever.jsonl "
    "--split dev --out runs/bench3/climate_fever-pool.jsonl",
    "factrl index build --corpus runs/bench3/climate_fever-pool.jsonl --out runs/bench3/climate_fever-index",
]
_TEACH = {"scifact": (110, 110), "feverous_s": (25, 25), "climate_fever": (25, 25)}
_SFT_TAKE = {"scifact-offline": 80, "scifact-online": 60, "feverous_s-offline": 15, "feverous_s-online": 15,
             "climate_fever-offline": 15, "climate_fever-online": 15}


@dataclass
class EmbeddedAgentSettings:
    """Every option of the recipe. The ``*_items`` lists keep the command-line spelling
    (``KEY=VALUE``), so the manifest's commands repeat them as given."""

    out: Path = Path("runs/agent")
    index_items: list[str] = field(default_factory=list)  # SOURCE=DIR
    teach_items: list[str] = field(default_factory=list)  # SOURCE=OFFLINE,ONLINE
    sft_take_items: list[str] = field(default_factory=list)  # RUN=N
    sft_lr: float = 2e-4
    sft_epochs: float = 1.0
    sft_max_length: int = 1150
    lora_r: int = 16
    sft_decision_weight: float | None = None
    sft_from: str | None = None
    sft_tokens_per_batch: int = 4096
    grpo_minutes: float = 40.0
    grpo_lr: float = 1e-5
    grpo_from: str | None = None
    set_items: list[str] = field(default_factory=list)  # KEY=VALUE for the GRPO config
    agent_param_items: list[str] = field(default_factory=list)  # KEY=VALUE for the agent
    model: str | None = None
    tag: str | None = None
    sources: list[str] = field(default_factory=lambda: list(SOURCES))
    modes: list[str] = field(default_factory=lambda: ["offline", "online"])
    eval_tokens: int = 128
    no_repeat_ngram: int = 0
    limit: int | None = None

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        for name, items in (("--index", self.index_items), ("--teach", self.teach_items),
                            ("--sft-take", self.sft_take_items), ("--set", self.set_items),
                            ("--agent-param", self.agent_param_items)):
            bad = [kv for kv in items if "=" not in kv]
            if bad:
                raise ValueError(f"{name} expects KEY=VALUE, got {bad[0]!r}")
        unknown = sorted(set(self.sources) - set(SOURCES))
        if unknown:
            raise ValueError(f"unknown source(s) {unknown}; available: {', '.join(SOURCES)}")
        if set(self.modes) - {"offline", "online"}:
            raise ValueError(f"modes are offline and online, got {self.modes}")
        self.teach_counts()  # malformed counts fail now, not after the split stage

    @property
    def agent_params(self) -> dict[str, Any]:
        from factrl.envs import parse_params

        return parse_params(self.agent_param_items)

    def agent(self, mode: str) -> EnvSpec:
        """The agent in one setting, with the recipe's parameters."""
        return EnvSpec(name=AGENT, params={**self.agent_params, "mode": mode})

    @property
    def indexes(self) -> dict[str, str]:
        return {**DEFAULT_INDEX, **dict(kv.split("=", 1) for kv in self.index_items)}

    def teach_counts(self) -> dict[str, tuple[int, int]]:
        counts = dict(_TEACH)
        for kv in self.teach_items:
            k, v = kv.split("=", 1)
            parts = v.split(",")
            if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
                raise ValueError(f"--teach expects SOURCE=OFFLINE,ONLINE, got {kv!r}")
            counts[k] = (int(parts[0]), int(parts[1]))
        return counts

    def sft_take(self) -> dict[str, int]:
        caps = dict(_SFT_TAKE)
        for kv in self.sft_take_items:
            k, v = kv.split("=", 1)
            caps[k] = int(v)
        return caps
