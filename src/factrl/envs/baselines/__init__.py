"""Baseline agents on the environment contract the trainer uses, each selectable by
``--agent NAME`` (registered lazily in :data:`~factrl.envs.base.ENVS`):

- ``direct``: the claim alone → ``Label: X`` (+ an optional ``Reason:``); no evidence.
- ``rag``: the claim as the query, its top-k retrieved units in one prompt, one answer
  with label and cited ``[[id]]`` evidence.
- ``decompose``: sub-claims first, then each verified with retrieval in its own fresh
  context; the label is their AND-aggregation, the evidence the union of cited ids.
- ``react``: ``Thought:`` / ``Action: search[q]`` / ``Action: finish[LABEL | [[id]], ...]``
  steps, with ``Observation:`` inserted by the environment.

Their formats are plain text lines (:mod:`~factrl.envs.baselines.answer`), documented in
docs/formats.md; parsers never raise on model output.
"""
