"""Binary RAR's rule-based teacher on a generated world: long-form prompts get the notes
restated, the world's short-form questions the one sentence of the notes that answers
them (an abstention when the notes do not say), and its noise swaps stated values in
both — contradictions the world's exact verifier catches."""

import pytest

from factrl.datasets import load_dataset
from factrl.datasets.factworld import FactWorld, WorldConfig, write_world
from factrl.envs.rar import RarEnv
from factrl.protocol.rar import matches_gold
from factrl.teachers.rar import RarTeacher


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("world")
    write_world(WorldConfig(seed=13, entities=60, claims=30), d)
    return d


def _prompts(world, folder):
    return [c for split in ("train", "dev", "test") for c in load_dataset("rar_prompts", world / folder, split).claims]


def _context(claim):
    return RarEnv(show_documents=True).reset(claim)[0].content


def test_a_short_question_gets_the_sentence_that_answers_it_or_an_abstention(world):
    teacher = RarTeacher(world=world)
    checker = FactWorld.load(world)
    short = _prompts(world, "rar_short")
    answerable = [c for c in short if c.meta["answerable"]]
    unanswerable = [c for c in short if not c.meta["answerable"]]
    assert answerable and unanswerable
    for c in answerable:
        said = teacher._respond(_context(c))
        assert matches_gold(said, c.meta["answers"]), (c.text, said)
        assert [j.verdict for j in checker.check_text(said)] == ["supported"]  # one sentence, the fact asked
    assert {teacher._respond(_context(c)) for c in unanswerable} == {"I don't know."}
    long = _prompts(world, "rar")[0]
    assert len(checker.check_text(teacher._respond(_context(long)))) > 1  # a long-form prompt: the notes restated


def test_the_noisy_teacher_answers_short_questions_wrong_by_the_same_swap(world):
    checker = FactWorld.load(world)
    answerable = [c for c in _prompts(world, "rar_short") if c.meta["answerable"]]
    noisy = RarTeacher(world=world, noise=1.0)
    said = [noisy._respond(_context(c)) for c in answerable]
    wrong = [s for s, c in zip(said, answerable) if not matches_gold(s, c.meta["answers"])]
    assert len(wrong) >= 0.8 * len(answerable) and noisy.swapped == len(wrong)
    assert all(checker.check(s) == "contradicted" for s in wrong)
    again = RarTeacher(world=world, noise=1.0)
    assert [again._respond(_context(c)) for c in answerable] == said  # seeded: the same answers again
