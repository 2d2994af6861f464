"""``decompose``: split the claim into sub-claims (each is then verified with the ``rag``
prompt in a fresh context)."""

TEMPLATE = """You are a claim-verification assistant. Break the claim below into at most {max_subclaims} simple sub-claims that can each be checked on its own and that are all true exactly when the claim is true. A simple claim may stay one sub-claim.

Write only the numbered list, one sub-claim per line, and nothing else:
1. first sub-claim
2. second sub-claim

Claim: {claim}
"""
