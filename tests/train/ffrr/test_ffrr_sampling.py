"""FFRR's sampling rules: ε-greedy statistics, the stopping rule, question choice."""

import random

import pytest

from factrl.train.ffrr.sampling import epsilon_greedy_pick, pick_questions, run_doc_episode, stop_reached

# 20 candidates: three likely ones, then 17 sharing 0.3
PROBS = [0.4, 0.2, 0.1] + [0.3 / 17] * 17
N = 20000


def freqs(epsilon, top_k, probs=PROBS, exclude=()):
    rng = random.Random(0)
    counts = [0] * len(probs)
    explored = 0
    for _ in range(N):
        i, ex = epsilon_greedy_pick(probs, rng, epsilon=epsilon, top_k=top_k, exclude=exclude)
        counts[i] += 1
        explored += ex
    return [c / N for c in counts], explored / N


def test_epsilon_greedy_sampling_statistics():
    f, explored = freqs(0.1, 3)
    assert explored == pytest.approx(0.1, abs=0.01)
    # exploit (0.9): π renormalised over the top 3 = 4/7, 2/7, 1/7; explore (0.1): 1/20 each
    for i, share in enumerate([4 / 7, 2 / 7, 1 / 7]):
        assert f[i] == pytest.approx(0.9 * share + 0.1 / 20, abs=0.015)
    assert sum(f[3:]) == pytest.approx(0.1 * 17 / 20, abs=0.01)
    assert max(f[3:]) < 0.015  # each tail document only through exploration (0.005)


def test_epsilon_zero_never_leaves_the_top_k_and_one_is_uniform():
    f, explored = freqs(0.0, 3)
    assert explored == 0 and sum(f[3:]) == 0
    f, explored = freqs(1.0, 3)
    assert explored == 1
    assert all(x == pytest.approx(1 / 20, abs=0.01) for x in f)


def test_sampled_documents_are_not_drawn_again():
    f, _ = freqs(0.1, 3, exclude=[0])
    assert f[0] == 0
    # the top 3 of what is left: candidates 1, 2 and one of the tail
    assert f[1] == pytest.approx(0.9 * 0.2 / (0.2 + 0.1 + 0.3 / 17) + 0.1 / 19, abs=0.015)
    with pytest.raises(ValueError, match="no candidate left"):
        epsilon_greedy_pick([0.5, 0.5], random.Random(0), epsilon=0.1, top_k=3, exclude=[0, 1])
    with pytest.raises(ValueError, match="epsilon"):
        epsilon_greedy_pick(PROBS, random.Random(0), epsilon=1.5, top_k=3)


def test_stop_rule_on_summed_label_scores():
    assert not stop_reached([], 0)
    assert not stop_reached([[0.6, 0.4]], 1)
    assert not stop_reached([[0.6, 0.4], [0.5, 0.5]], 1)  # sums 1.1 / 0.9
    assert stop_reached([[0.6, 0.4], [0.5, 0.5], [0.1, 0.9]], 1)  # sums 1.2 / 1.8
    assert stop_reached([[0.2, 0.8]], 1)


def episode(dists, gold, *, top_k, max_samples=10):
    """ε = 0 and all of π on candidate 0 (the rest tie at 0, taken in rank order), so
    candidates are drawn 0, 1, 2, ...; ``dists[i]`` is candidate i's label distribution."""
    probs = [1.0] + [0.0] * (len(dists) - 1)
    sets = []

    def score_set(idx):
        sets.append(list(idx))
        return [0.25, 0.75]

    ep = run_doc_episode(probs, gold, random.Random(0), lambda i: dists[i], score_set,
                         epsilon=0.0, top_k=top_k, max_samples=max_samples)
    return ep, sets


def test_doc_episode_stops_when_the_summed_argmax_is_gold_and_scores_the_first_k():
    dists = [[0.6, 0.4], [0.5, 0.5], [0.1, 0.9], [0.9, 0.1]]
    ep, sets = episode(dists, 1, top_k=1)
    assert ep.picked == [0, 1, 2] and ep.stopped  # κ = 3
    assert ep.rewards == [0.4, 0.5, 0.9]
    assert ep.final_docs == [0] and sets == [[0]]  # k = min(K = 1, κ = 3)
    assert ep.final_reward == 0.75
    # already right after one document: κ = 1, so k = min(3, 1) = 1
    ep, sets = episode([[0.2, 0.8], [0.9, 0.1]], 1, top_k=3)
    assert ep.picked == [0] and sets == [[0]]


def test_doc_episode_without_stop_runs_to_its_budget():
    dists = [[0.9, 0.1]] * 6
    ep, sets = episode(dists, 1, top_k=3, max_samples=4)
    assert len(ep.picked) == 4 and not ep.stopped
    assert len(set(ep.picked)) == 4  # no document twice
    assert sets == [ep.picked[:3]]


def test_question_choice_prefers_low_rewards():
    rewards = [0.9, 0.1, 0.5, 0.3]
    assert pick_questions(rewards, 2, random.Random(0), epsilon=0.0) == [1, 3]
    assert pick_questions(rewards, 9, random.Random(0), epsilon=0.0) == [1, 3, 2, 0]
    rng = random.Random(1)
    firsts = [pick_questions(rewards, 1, rng, epsilon=0.2)[0] for _ in range(5000)]
    assert firsts.count(1) / 5000 == pytest.approx(0.8 + 0.2 / 4, abs=0.02)
    assert firsts.count(0) / 5000 == pytest.approx(0.2 / 4, abs=0.015)
