"""The verl path for GPU clusters: export claims to verl's parquet layout, score
responses with Veri-R1's reward (``reward.compute_score``), and run factrl environments
inside verl's multi-turn rollout (``agent_loop``, which needs verl installed).

``docs/cluster.md`` walks through a whole run; ``examples/`` holds the agent-loop config
and a launch script.
"""

from pathlib import Path

from factrl.train.verl.export import VerlDataError, VerlExport, export_verl_parquet, read_verl_parquet
from factrl.train.verl.reward import compute_score

__all__ = [
    "EXAMPLES_DIR",
    "VerlDataError",
    "VerlExport",
    "compute_score",
    "export_verl_parquet",
    "read_verl_parquet",
]

# The agent-loop YAML and launch script shipped with the package (copy them and edit).
EXAMPLES_DIR = Path(__file__).parent / "examples"
