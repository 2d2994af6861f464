"""HARIS (Hu et al., 2025): a reasoning agent (``haris``) that asks a search agent
(``haris_searcher``) questions, and the single-agent comparison (``haris_single``)."""

from factrl.protocol.haris import binary_gold, parse_boxed, parse_turn
from factrl.envs.haris.reasoner import SEARCHER, HarisConfig, HarisEnv, parse_reasoner_text
from factrl.envs.haris.searcher import HarisSearcherEnv, SearcherConfig, SearchSession
from factrl.envs.haris.single import HarisSingleEnv, SingleConfig

__all__ = ["SEARCHER", "HarisConfig", "HarisEnv", "HarisSearcherEnv", "HarisSingleEnv", "SearcherConfig",
           "SearchSession", "SingleConfig", "binary_gold", "parse_boxed", "parse_reasoner_text", "parse_turn"]
