"""Prompt templates, word for word from the papers' released prompts (Veri-R1 Figures 9
and 10), so results stay comparable with the published numbers."""

from factrl.protocol.notices import BUDGET_SPENT, BUDGET_SPENT_NOTICES  # noqa: F401 - part of this module's surface

VERI_R1_ONLINE = """You are a claim-verification assistant. You MUST follow this protocol exactly:

<plan>…</plan>
- Once at the start: sketch your high-level strategy, such as claim decomposition, entity recognition, etc.

<search>…</search>
- When you need a fact: emit exactly this tag with your query.
- To make the most of your search turns, don’t repeat identical queries.
- You can search at most {max_searches} times.

<information>
[[e_1]]: info1
[[e_2]]: info2
…
</information>
- You will be given claim related information in the format above.

<think>…</think>  
- Use for every piece of reasoning; do not state your final verdict here.
- You must conduct reasoning inside <think> and </think> first every time you get new information.

<answer>
Label: SUPPORT / REFUTE / NOT ENOUGH INFO
Evidence: [[e_1]], [[e_3]], ...
</answer>  
- Emit exactly once at the end, no extra text or tags.
- Evidence id such as e_1 will be replaced by real ids from the corpus. You must include useful real ids when answering
- Evidence outputs must strictly enforce the format [[e_i]], [[e_j]]…
- Answer Labels respectively stand for:
SUPPORT: The claim is consistent with the cited evidence and the evidence is sufficient to confirm the claim.
REFUTE: The claim contradicts the cited evidence and the evidence is sufficient to disprove the claim.
NOT ENOUGH INFO: The available evidence is insufficient to determine whether the claim is true or false.

- Note that the process should be: plan → (search → information → think) repeat until conclusion → answer

Verify the claim:
{claim}
"""

VERI_R1_OFFLINE = """You are a claim-verification assistant. You MUST follow this protocol exactly:

<information>
[[e_1]]: info1
[[e_2]]: info2
…
</information>
- You will be given claim related information above.

<think>…</think>
- Use for every piece of reasoning.
- During reasoning, you must verify the claim step by step based on the given information.

<answer>
Label: SUPPORT / REFUTE / NOT ENOUGH INFO
Evidence: [[e_1]], [[e_3]], ...
</answer>
- Emit exactly once at the end, no extra text or tags.
- Evidence id such as e_1 will be replaced by real ids from the corpus. You must include useful real ids when answering
- Evidence outputs must strictly enforce the format [[e_i]], [[e_j]]…
- Answer Labels respectively stand for:
SUPPORT: The claim is consistent with the cited evidence and the evidence is sufficient to confirm the claim.
REFUTE: The claim contradicts the cited evidence and the evidence is sufficient to disprove the claim.
NOT ENOUGH INFO: The available evidence is insufficient to determine whether the claim is true or false.

Verify the claim:
{claim}

<information>
{evidence}
</information>
"""

# The same protocol, short: for small models whose context and compute the paper's
# ~440-token instructions would dominate (not the published prompts; results with them are
# not comparable with the papers' numbers).
_SHORT_ANSWER = """<answer>
Label: SUPPORT / REFUTE / NOT ENOUGH INFO
Evidence: [[id]], [[id]]
</answer> once, at the end.
SUPPORT: the evidence confirms the claim. REFUTE: the evidence contradicts the claim. NOT ENOUGH INFO: the evidence cannot decide.

Claim: {claim}
"""

VERI_R1_ONLINE_SHORT = """Verify the claim. Protocol:
<plan>your strategy</plan> once, first.
<search>a query</search> to search, at most {max_searches} times; results come as <information> lines [[id]]: text.
<think>your reasoning</think> after each <information>.
""" + _SHORT_ANSWER

VERI_R1_OFFLINE_SHORT = """Verify the claim from the information. Protocol:
<think>your reasoning</think>
""" + _SHORT_ANSWER + """
<information>
{evidence}
</information>
"""

VERI_R1_PROMPTS = {
    "paper": {"online": VERI_R1_ONLINE, "offline": VERI_R1_OFFLINE},
    "short": {"online": VERI_R1_ONLINE_SHORT, "offline": VERI_R1_OFFLINE_SHORT},
}

# The notice after the last allowed search lives with the text protocol, which readers
# of responses share (factrl.protocol.notices).
OVER_BUDGET = "\n\n<information>\nNo searches left. Give your final <answer> now.\n</information>\n\n"
