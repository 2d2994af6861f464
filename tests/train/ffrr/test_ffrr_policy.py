"""The dual-encoder policy, REINFORCE's and REPLUG's updates, save → reload."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from factrl.train.ffrr.objectives import expected_reward_loss, reinforce_loss, replug_loss  # noqa: E402
from factrl.train.ffrr.policy import DualEncoderPolicy  # noqa: E402

QUERY = "Does aspirin prevent heart attacks?"
DOCS = ["Aspirin reduced first heart attacks in a randomised trial.",
        "Vitamin D did not prevent hip fractures.",
        "Caffeine before bed shortens sleep.",
        "Statins lower LDL cholesterol."]


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def policy(tau=0.05):
    torch.manual_seed(0)
    return DualEncoderPolicy("all-MiniLM-L6-v2", tau=tau, max_seq_length=64)


def probs(p):
    with torch.no_grad():
        return p.candidate_log_probs(QUERY, DOCS).exp().tolist()


def step(p, samples, lr=1e-4, baseline=0.0):
    opt = torch.optim.Adam(p.parameters(), lr=lr)
    lp = p.candidate_log_probs(QUERY, DOCS)
    loss = reinforce_loss([lp[i] for i, _ in samples], [r for _, r in samples], baseline=baseline)
    opt.zero_grad()
    loss.backward()
    opt.step()


def test_policy_is_a_softmax_over_the_candidates():
    p = policy()
    got = probs(p)
    assert sum(got) == pytest.approx(1.0, abs=1e-6)
    assert max(range(4), key=got.__getitem__) == 0  # the aspirin abstract
    sharper = DualEncoderPolicy("all-MiniLM-L6-v2", tau=0.01, max_seq_length=64)
    assert max(probs(sharper)) > max(got)


def test_reinforce_raises_the_probability_of_a_rewarded_document():
    """A hand-made case: document 2 sampled with reward 1 and document 0 with reward 0; one
    step must raise π(2|q). With a mean baseline (0.5), document 0's negative advantage
    must lower π(0|q)."""
    p = policy()
    before = probs(p)
    step(p, [(2, 1.0), (0, 0.0)])
    after = probs(p)
    assert after[2] > before[2] * 1.05
    p = policy()
    step(p, [(2, 1.0), (0, 0.0)], baseline=0.5)
    assert probs(p)[0] < before[0]


def test_negative_reward_lowers_the_probability():
    p = policy()
    before = probs(p)
    step(p, [(0, -1.0)])
    assert probs(p)[0] < before[0]


def test_reinforce_loss_checks_its_inputs():
    with pytest.raises(ValueError, match="no sampled"):
        reinforce_loss([], [])
    with pytest.raises(ValueError, match="2 log-probabilities but 1"):
        reinforce_loss([torch.tensor(0.0), torch.tensor(0.0)], [1.0])
    with pytest.raises(ValueError, match="finite"):
        reinforce_loss([torch.tensor(0.0)], [float("nan")])


def test_exact_expectation_moves_mass_to_the_best_rewarded_document():
    """−Σ π_θ(d)·R(d): one step raises the best document's probability and lowers the
    worst's; its gradient is REINFORCE's expected one (rewards shifted by a constant give
    the same gradient: the policy's mean is the baseline)."""
    rewards = [-4.0, -3.5, -2.0, -3.0]  # log-likelihood-like: all negative, doc 2 best, doc 0 worst
    p = policy(tau=0.2)  # π_θ spread enough that every document carries weight
    before = probs(p)
    opt = torch.optim.Adam(p.parameters(), lr=1e-4)
    loss = expected_reward_loss(p.candidate_log_probs(QUERY, DOCS), rewards)
    opt.zero_grad()
    loss.backward()
    opt.step()
    after = probs(p)
    assert after[2] > before[2] and after[0] < before[0]
    z = torch.tensor([0.3, 0.1, -0.2, 0.0], requires_grad=True)  # scores before the softmax
    g1 = torch.autograd.grad(expected_reward_loss(torch.log_softmax(z, -1), rewards), z)[0]
    g2 = torch.autograd.grad(expected_reward_loss(torch.log_softmax(z, -1), [r + 10 for r in rewards]), z)[0]
    assert torch.allclose(g1, g2, atol=1e-6) and float(g1.abs().sum()) > 0
    pi = torch.softmax(z.detach(), -1)
    r = torch.tensor(rewards)
    assert torch.allclose(g1, -pi * (r - (pi * r).sum()), atol=1e-6)  # Σ π(d)(R(d) − E_π R) ∇log π(d)
    lp = torch.log_softmax(z.detach(), -1)
    with pytest.raises(ValueError, match="4 documents but 3"):
        expected_reward_loss(lp, rewards[:3])
    with pytest.raises(ValueError, match="finite"):
        expected_reward_loss(lp, [float("inf"), 0, 0, 0])


def test_replug_moves_retrieval_towards_the_lm_distribution():
    p = policy()
    lm_scores = [0.1, 0.1, 0.9, 0.1]  # the LM likes document 2 best
    before = probs(p)
    opt = torch.optim.Adam(p.parameters(), lr=1e-4)
    lp = p.candidate_log_probs(QUERY, DOCS)
    loss = replug_loss(lp, lm_scores, beta=0.1)
    assert float(loss.detach()) > 0
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        assert float(replug_loss(p.candidate_log_probs(QUERY, DOCS), lm_scores, beta=0.1)) < float(loss.detach())
    assert probs(p)[2] > before[2]
    same = replug_loss(torch.log_softmax(torch.tensor([0.0, 1.0]), -1), [0.0, 1.0], beta=1.0)
    assert float(same) == pytest.approx(0.0, abs=1e-6)  # identical distributions: KL 0


def test_save_then_reload_gives_the_same_embeddings(tmp_path):
    from sentence_transformers import SentenceTransformer

    from factrl.retrieval.encoders import TextEncoder

    p = policy()
    step(p, [(2, 1.0)])  # a trained (changed) encoder, not the stock one
    want = p.embed(DOCS + [QUERY], grad=False).numpy()
    out = p.save(tmp_path / "final")
    st = SentenceTransformer(str(out), device="cpu")
    got = st.encode(DOCS + [QUERY], convert_to_numpy=True, normalize_embeddings=False)
    np.testing.assert_allclose(got, want, atol=1e-5)
    enc = TextEncoder(str(out), precision="fp32", max_seq_length=64)  # what `index build --model` loads
    np.testing.assert_allclose(enc.encode(DOCS + [QUERY]), want, atol=1e-5)
    stock = TextEncoder("all-MiniLM-L6-v2", precision="fp32", max_seq_length=64).encode(DOCS)
    assert np.abs(stock - want[:4]).max() > 1e-4  # the trained weights were saved, not the stock ones
