"""``direct``: the claim alone, no evidence, one answer."""

TEMPLATE = """You are a claim-verification assistant. Decide whether the claim below is true, using only what you already know: no evidence is given.

Answer in exactly this format and write nothing else:
Label: SUPPORT / REFUTE / NOT ENOUGH INFO
Reason: one short sentence (this line is optional)

The labels mean:
SUPPORT: the claim is true.
REFUTE: the claim is false.
NOT ENOUGH INFO: you cannot tell whether the claim is true or false.

Claim: {claim}
"""
