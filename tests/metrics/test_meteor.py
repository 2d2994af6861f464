"""METEOR offline: the WordNet folder and parity with NLTK's meteor_score (the tokenizer:
test_punkt.py)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

pytest.importorskip("nltk")

from factrl.metrics import meteor as m  # noqa: E402


def test_ensure_wordnet_builds_an_nltk_data_folder(wordnet_root: Path) -> None:
    import nltk

    corpus = wordnet_root / "corpora" / "wordnet"
    lines = (corpus / "lexnames").read_text().splitlines()
    assert len(lines) == 45
    assert lines[0] == "00\tadj.all\t3" and lines[3] == "03\tnoun.Tops\t1"
    assert lines[29] == "29\tverb.body\t2" and lines[44] == "44\tadj.ppl\t3"
    for name in ("data.noun", "index.verb", "adj.exc", "index.sense"):
        assert (corpus / name).is_file() and not (corpus / name).is_symlink()
    assert nltk.data.path[0] == str(wordnet_root)
    assert m.ensure_wordnet(data_dir=wordnet_root) == wordnet_root  # idempotent
    from nltk.corpus import wordnet

    assert wordnet.get_version() == "3.0"
    assert wordnet.synset("car.n.01").lexname() == "noun.artifact"


def test_lexnames_table_matches_the_man_page() -> None:
    page = Path("/usr/share/man/man5/lexnames.5WN.gz")
    if not page.is_file():
        pytest.skip("lexnames(5WN) man page not installed")
    rows = re.findall(r"^(\d\d)\t(\S+)", gzip.open(page, "rt").read(), flags=re.M)
    assert [int(n) for n, _ in rows] == list(range(45))
    assert tuple(name for _, name in rows) == m.LEXNAMES


def test_missing_wordnet_names_the_apt_packages(tmp_path: Path) -> None:
    with pytest.raises(m.WordNetMissingError, match="apt-get install wordnet-base wordnet-sense-index"):
        m.ensure_wordnet(source=tmp_path, data_dir=tmp_path / "out")


PAIRS = [
    ("The cat sat on the mat.", "The cat sat on the mat."),
    ("the cat sat on the mat", "on the mat sat the cat"),
    ("Where was the claim first published?", "Where was the claim published first?"),
    ("He is ill.", "He is sick."),  # only WordNet matches ill/sick
    ("The auto is fast", "The car is fast"),
    ("Running dogs were barking loudly", "A dog runs and barks"),  # stems
    ("Nothing in common", "Completely different words here"),
]


@pytest.mark.parametrize(("hyp", "ref"), PAIRS)
def test_meteor_equals_nltk_meteor_score(wordnet_root: Path, hyp: str, ref: str) -> None:
    from nltk.translate.meteor_score import meteor_score

    expected = meteor_score([m.tokenize(ref)], m.tokenize(hyp))
    assert m.meteor(hyp, ref) == pytest.approx(expected, abs=1e-12)


def test_meteor_worked_examples(wordnet_root: Path) -> None:
    # Identical texts of m tokens: P = R = 1, one chunk, penalty 0.5 * (1/m)^3.
    assert m.meteor("the cat sat on the mat", "the cat sat on the mat") == pytest.approx(1 - 0.5 / 6**3)
    assert m.meteor("claim", "claim") == pytest.approx(0.5)
    # "he is ill" vs "he is sick": with WordNet all 3 words match in one chunk.
    assert m.meteor("he is ill", "he is sick") == pytest.approx(1 - 0.5 / 3**3)
    # Without synonyms only "he is" matches: P = R = 2/3, Fmean = 2/3, one chunk of 2.
    from nltk.translate.meteor_score import meteor_score

    class NoSynonyms:
        def synsets(self, word: str) -> list:
            return []

    no_wn = meteor_score([["he", "is", "sick"]], ["he", "is", "ill"], wordnet=NoSynonyms())
    assert no_wn == pytest.approx(2 / 3 * (1 - 0.5 * (1 / 2) ** 3))
    assert m.meteor("", "he is sick") == 0.0 and m.meteor("he", "") == 0.0


def test_meteor_is_asymmetric(wordnet_root: Path) -> None:
    # Recall weighs 9x precision (alpha = 0.9): a short hypothesis of a long reference
    # scores lower than the reverse.
    short, long_ = "the cat", "the cat sat on the mat"
    assert m.meteor(short, long_) < m.meteor(long_, short)
