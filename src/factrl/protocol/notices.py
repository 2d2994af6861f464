"""Text the system itself writes into an agent's transcript, which readers of a response
must tell apart from the model's own words."""

from __future__ import annotations

__all__ = ["BUDGET_SPENT", "BUDGET_SPENT_NOTICES"]

# Appended after the last allowed search's results (the paper: once the search budget is
# spent the model must answer; as after every <information>, it reasons in <think> first).
BUDGET_SPENT = "\n\nThe search budget is spent. Reason in <think>, then give your final <answer>.\n\n"
# Every wording BUDGET_SPENT has had, so responses recorded with an earlier one are still
# read as the system's text (factrl.train.verl.reward, factrl.protocol.veri_r1_authors).
BUDGET_SPENT_NOTICES = (
    BUDGET_SPENT,
    "\n\nThe search budget is spent. Reason in <think> if needed, then give your final <answer>.\n\n",
)
