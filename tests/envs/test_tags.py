from hypothesis import given, settings
from hypothesis import strategies as st

from factrl.envs.tags import check_protocol, last_block, parse_answer, parse_evidence_ids, scan_blocks
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
