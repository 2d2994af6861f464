"""ProFact (SPEC §3): a three-stage agent — verification questions, an isolated
search-and-answer context per question, a verdict with an AVeriTeC label — registered as
``profact`` in :data:`~factrl.envs.base.ENVS` and scored by the ``profact`` process reward.

``factrl eval --agent profact --dataset averitec --index INDEX`` runs it; the stage
protocols are in :mod:`factrl.protocol.profact`.
"""

from factrl.envs.profact.env import SEARCH_ROLE, STAGES, ProFactConfig, ProFactEnv, QAStep, make_profact
from factrl.protocol.profact import (
    AVERITEC_LABELS,
    parse_answer,
    parse_questions,
    parse_search_call,
    parse_verdict_turn,
)

__all__ = [
    "AVERITEC_LABELS",
    "SEARCH_ROLE",
    "STAGES",
    "ProFactConfig",
    "ProFactEnv",
    "QAStep",
    "make_profact",
    "parse_answer",
    "parse_questions",
    "parse_search_call",
    "parse_verdict_turn",
]
