"""``rag``: the claim, its top-k retrieved sentences, one answer citing them (also the
per-sub-claim turn of ``decompose``)."""

TEMPLATE = """You are a claim-verification assistant. Decide whether the {what} below is supported or refuted by the retrieved information, and cite the lines you relied on.

Retrieved information (each line starts with its id):
{information}

Answer in exactly this format and write nothing else:
Label: SUPPORT / REFUTE / NOT ENOUGH INFO
Evidence: [[id]], [[id]], ...
Reason: one short sentence (this line is optional)

- Cite ids exactly as shown above, each as [[id]], separated by commas; write "Evidence: none" when no line is relevant.
- SUPPORT: the cited information confirms the {what}.
- REFUTE: the cited information contradicts the {what}.
- NOT ENOUGH INFO: the information is insufficient to tell.

{What}: {claim}
"""

NOTHING_FOUND = "(nothing was found)"
