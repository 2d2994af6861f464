"""FFRR (Zhang & Gao, 2024): training a dense retriever from a black-box LM's label scores.

``sampling`` (ε-greedy choice, stopping rule), ``policy`` (the dual encoder as π_θ),
``objectives`` (REINFORCE, REPLUG's KL), ``episodes`` (what one claim contributes),
``questions`` (claim decomposition), ``trainer`` (``factrl train ffrr``), ``evaluate``
(held-out retrieval and label metrics), ``config`` (presets in ``factrl.presets.ffrr``).
The label scorer itself is :class:`factrl.lm.label_scores.LabelScorer`.
"""

from factrl.train.ffrr.config import FFRRRunConfig, load_ffrr_config

__all__ = ["FFRRRunConfig", "load_ffrr_config"]
