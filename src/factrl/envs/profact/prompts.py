"""ProFact's prompts (the paper prints none; these state the stage protocols of
:mod:`factrl.protocol.profact` with one example each)."""

QUESTION = """You are a fact-checker. Verify the claim below in three stages.

Stage 1 (now): write at most {max_questions} verification questions whose answers would show whether the claim is true. Write only the numbered questions inside <questions> tags, like this:
<questions>
1. Who said this, and when?
2. What do official figures show?
</questions>

Later you will search for evidence for each question and answer it, and then give the verdict.

Claim: {claim}{context}
"""

SEARCH = """You are a fact-checker answering one verification question of a claim with evidence.

First call the search tool once: write a short query inside <search></search> tags. The results come back inside <information></information> tags. Then answer the question in one or two sentences grounded in that evidence, inside <answer></answer> tags. If the evidence does not answer it, say so in the answer.

Example:
<search>unemployment rate 2019 official figures</search>
<information>...</information>
<answer>Official figures put unemployment at 3.7% in 2019.</answer>

Claim: {claim}
Question: {question}
"""

INFORMATION = "\n<information>\n{information}\n</information>\n"
NOTHING_FOUND = "(no results)"

VERDICT = """

Stage 3: the verification record (your questions with the evidence-grounded answers):
{record}

Now give the verdict on the claim. Optionally explain it briefly inside <justification></justification> tags, then write exactly one label inside <verdict></verdict> tags, one of: Supported, Refuted, Not Enough Evidence, Conflicting Evidence/Cherrypicking.
"""

NO_RECORD = "(no question was answered)"
