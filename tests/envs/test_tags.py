import time

from hypothesis import given, settings
from hypothesis import strategies as st

from factrl.protocol.tags import MAX_TAGS, check_protocol, last_block, parse_answer, parse_evidence_ids, scan_blocks
from factrl.labels import Label

ONLINE = dict(allowed=("plan", "search", "think", "answer"), first="plan", once=("plan",), max_counts={"search": 3})


def test_scan_blocks_well_formed():
    blocks, errors = scan_blocks("<plan>a</plan>\n<search>q</search> <answer>x</answer>")
    assert errors == []
    assert [b.name for b in blocks] == ["plan", "search", "answer"]
    assert blocks[1].content == "q"


def test_scan_blocks_reports_every_problem_kind():
    _, errors = scan_blocks("hello <plan>a<think>b</think></plan></x> tail")
    joined = " | ".join(errors)
    assert "text outside tags: 'hello'" in joined
    assert "nested" in joined
    assert "without an opening tag" in joined
    assert "'tail'" in joined
    _, errors = scan_blocks("<plan>never closed")
    assert errors == ["<plan> is never closed"]


def test_parse_answer_label_and_evidence():
    a = parse_answer("\nLabel: SUPPORT\nEvidence: [[doc_id=1_sentence_2]], [[Hog Island Light_sentence_6]]\n")
    assert a.errors == []
    assert a.label is Label.SUPPORT
    assert a.evidence_ids == ["doc_id=1_sentence_2", "Hog Island Light_sentence_6"]


def test_parse_answer_accepts_spellings_and_empty_evidence():
    a = parse_answer("Label: not enough info\nEvidence:")
    assert a.label is Label.NEI and a.evidence_ids == [] and a.errors == []
    assert parse_answer("Label: REFUTES\nEvidence: None").errors == []


def test_parse_answer_errors_are_recorded_not_raised():
    a = parse_answer("I think it is true")
    assert a.label is None
    assert any("Label" in e for e in a.errors)
    b = parse_answer("Label: MAYBE\nEvidence: e1, e2")
    assert b.label is None
    assert any("unknown label" in e for e in b.errors)
    assert any("[[id]] format" in e for e in b.errors)
    c = parse_answer("Label: SUPPORT\nEvidence: [[a]]\nBecause reasons.")
    assert any("extra text" in e for e in c.errors)


def test_evidence_ids_dedup_in_order():
    assert parse_evidence_ids("[[b]] [[a]] [[b]] [[ c ]]") == ["b", "a", "c"]


def test_evidence_ids_fit_on_one_line_and_are_not_empty():
    assert parse_evidence_ids("[[a\nb]] [[\n c \n]] [[ ]] [[[d]]]") == ["c", "d"]
    assert parse_answer("Label: SUPPORT\nEvidence: [[ ]]").errors == []


def test_parse_answer_lenient_layouts():
    # The value may sit on the next line; a star-only line after it belongs to it.
    for text in (
        "Label:\nSUPPORT\nEvidence: [[a]]",
        "Label: SUPPORT\n**\nEvidence: [[a]]",
        "label: support\nEVIDENCE: [[a]], [[a]]",
    ):
        a = parse_answer(text)
        assert (a.label, a.evidence_ids, a.errors) == (Label.SUPPORT, ["a"], []), text
    a = parse_answer("\n\n  **Label :** support **\n\nEvidence:\n[[a]]")
    assert a.label is Label.SUPPORT and a.evidence_ids == ["a"]
    assert a.errors == ["extra text in answer: '[[a]]'"]


def test_last_block():
    assert last_block("<search>one</search> x <search>two</search>", "search") == "two"
    assert last_block("no tags", "answer") is None


def test_protocol_good_episode():
    text = (
        "<plan>split it</plan><search>q1</search><think>ok</think>"
        "<answer>Label: SUPPORT\nEvidence: [[a]]</answer>"
    )
    _, errors = check_protocol(text, **ONLINE)
    assert errors == []


def test_protocol_violations():
    cases = {
        "<search>q</search><answer>x</answer>": "does not start with <plan>",
        "<plan>p</plan><information>fake</information><answer>x</answer>": "model wrote <information>",
        "<plan>p</plan><foo>x</foo><answer>x</answer>": "undeclared tag <foo>",
        "<plan>p</plan><plan>p</plan><answer>x</answer>": "<plan> appears 2 times",
        "<plan>p</plan><think>t</think>": "no <answer>",
        "<plan>p</plan><answer>x</answer><think>t</think>": "not the last block",
        "<plan>p</plan>" + "<search>q</search>" * 4 + "<answer>x</answer>": "<search> used 4 times",
        "<plan>p</plan><answer>x</answer> trailing": "text outside tags",
    }
    for text, expected in cases.items():
        _, errors = check_protocol(text, **ONLINE)
        assert any(expected in e for e in errors), (text, errors)


HOSTILE = st.one_of(
    st.text(),
    st.lists(
        st.sampled_from(
            ["<plan>", "</plan>", "<search>", "</search>", "<answer>", "</answer>", "<think>", "</think>",
             "<information>", "</information>", "Label:", "Evidence:", "[[", "]]", "SUPPORT", "\n", " ",
             "<", ">", "</", "x", "[[a]]", "<ans wer>", "<<>>", "\x00", "é"]
        ),
        max_size=40,
    ).map("".join),
)


@settings(max_examples=400, deadline=None)
@given(HOSTILE)
def test_parsers_never_raise(text):
    scan_blocks(text)
    check_protocol(text, **ONLINE)
    a = parse_answer(text)
    assert a.label is None or isinstance(a.label, Label)
    assert all(isinstance(i, str) and i for i in a.evidence_ids)
    last_block(text, "answer")


# About 100 kB each of what a small model can emit. The answer parser's patterns used to
# backtrack on blank lines and blank ids (cubic: 25 s for 1.6 kB of " \n", 6 s for "[["
# and 2 kB of spaces) and last_block re-scanned to the end from every opening (33 s for
# 20,000); the last one is a long but valid answer.
HOSTILE_100K = {
    "blank lines": " \n" * 50_000,
    "newlines": "\n" * 100_000,
    "brackets": "[[" * 50_000,
    "blank id": "[[" + " " * 99_998,
    "openings": "<answer>" * 12_500,
    "blank label": "<answer>Label: " + " \n" * 40_000,
    "bracket evidence": "<answer>Evidence: " + "[[" * 40_000,
    "nested searches": "<search>" * 12_000 + "</search>",
    "mix": ("<answer>Label: **" + " \n" * 20 + "[[ x" * 20 + "<search>Evidence: " + "*" * 10 + "\t\n") * 600,
    "long answer": "<answer>Label: SUPPORT\nEvidence: "
    + ", ".join(f"[[doc_{i}_sentence_{i % 7}]]" for i in range(4_000))
    + "</answer>",
}


def _episode(size: int) -> str:
    """A well-formed episode of about ``size`` characters with many search rounds: tags
    are the parsers' unit of work, so a fair yardstick has plenty of them."""
    head = "<plan>Find where the Nile flows.</plan>\n"
    round_ = "<search>where does the Nile flow</search>\n<think>The passage says it flows north.</think>\n"
    answer = "<answer>\nLabel: SUPPORT\nEvidence: [[nile_sentence_1]], [[nile_sentence_2]]\n</answer>"
    return head + round_ * ((size - len(head) - len(answer)) // len(round_)) + answer


def _parse_seconds(text: str, repeats: int) -> float:
    """Best time over ``repeats`` runs of every public parser on ``text``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        scan_blocks(text)
        last_block(text, "answer")
        parse_evidence_ids(text)
        parse_answer(text)
        check_protocol(text, **ONLINE)
        best = min(best, time.perf_counter() - start)
    return best


def test_hostile_text_parses_in_linear_time():
    normal = _episode(100_000)
    assert check_protocol(normal, **dict(ONLINE, max_counts=None))[1] == []
    # Relative to a normal text of the same size (the machine's speed cancels out), with a
    # floor for timer noise; a super-linear parser takes seconds here.
    budget = 20 * _parse_seconds(normal, 3) + 0.05
    for name, text in HOSTILE_100K.items():
        assert 80_000 <= len(text) <= 110_000, name
        assert _parse_seconds(text, 2) < budget, name


def test_hostile_text_results():
    a = parse_answer("[[" * 50_000)
    assert parse_evidence_ids("[[" * 50_000) == [] and a.label is None and a.evidence_ids == []
    assert parse_evidence_ids("[[" + " " * 99_998) == [] == parse_evidence_ids("[[" + " " * 99_996 + "]]")
    assert a.errors[:2] == ["answer has no 'Label:' line", "answer has no 'Evidence:' line"]
    assert a.errors[2].startswith("extra text in answer: '[[[[")
    assert scan_blocks("\n" * 100_000) == ([], [])
    blocks, errors = scan_blocks("<answer>" * 12_500)
    # Past MAX_TAGS tags the rest is not checked: said once, first.
    assert blocks == [] and len(errors) == MAX_TAGS + 1 and errors[-1] == "<answer> is never closed"
    assert errors[0] == f"12500 tags (more than {MAX_TAGS}); only the first {MAX_TAGS} were checked"
    assert last_block("<answer>" * 12_500, "answer") is None
    a = parse_answer("Label: " + " \n" * 40_000)
    assert a.label is None and a.errors == ["unknown label ''", "answer has no 'Evidence:' line"]
    a = parse_answer("Evidence: " + "[[" * 40_000)
    assert a.evidence_ids == [] and any("[[id]] format" in e for e in a.errors)
    text = "<search>" * 12_000 + "</search>"
    assert last_block(text, "search") == "<search>" * 11_999
    _, errors = check_protocol(text, **ONLINE)
    assert "<search> nested inside <search>" in errors and "no <answer>" in errors
    text = HOSTILE_100K["long answer"]
    a = parse_answer(last_block(text, "answer"))
    assert a.label is Label.SUPPORT and a.errors == [] and len(a.evidence_ids) == 4_000
