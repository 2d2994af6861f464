"""The text protocol agents speak and every reader of their text shares: tag scanning
(:mod:`~factrl.protocol.tags`), think stripping and small text helpers
(:mod:`~factrl.protocol.text`), each system's reading of a response
(:mod:`~factrl.protocol.haris`, :mod:`~factrl.protocol.profact`,
:mod:`~factrl.protocol.rar`, :mod:`~factrl.protocol.veri_r1_authors`) and the notices
the system writes into transcripts (:mod:`~factrl.protocol.notices`).

It sits below environments, rewards and metrics, so all three read text the same way
without importing each other. Label vocabularies are :mod:`factrl.labels` (one layer
with this package and :mod:`factrl.types`)."""

from factrl.protocol.tags import ParsedAnswer, TagBlock, check_protocol, last_block, parse_answer, scan_blocks
from factrl.protocol.text import strip_think

__all__ = ["ParsedAnswer", "TagBlock", "check_protocol", "last_block", "parse_answer", "scan_blocks", "strip_think"]
