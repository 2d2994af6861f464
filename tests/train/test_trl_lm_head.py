"""TRL's fused LM head on the CPU scores only the labelled (completion) positions once
compact_lm_head is on, with the same log-probabilities and gradients as the padded path."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from trl.trainer import utils as trl_utils  # noqa: E402

from factrl.train.trl_lm_head import compact_lm_head, lm_head_is_compact  # noqa: E402


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    from factrl.lm.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=32, heads=2)


def _run(path, monkeypatch, chooser):
    """Log-probs, parameter gradients and the rows the head projected, with ``chooser``
    as TRL's choice of path."""
    from transformers import AutoModelForCausalLM

    monkeypatch.setattr(trl_utils, "_use_triton", chooser)
    rows = []
    apply = trl_utils._ChunkedLogProbFunction.apply

    def spy(hidden, *a):
        rows.append(hidden.shape[0])
        return apply(hidden, *a)

    monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply", spy)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    trl_utils.add_fused_lm_head(model, temperature=0.8, outputs=("log_probs", "entropy"))
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 200, (3, 12), generator=gen)
    attn = torch.ones_like(ids)
    attn[0, :4] = 0  # a left-padded prompt
    attn[2, -3:] = 0  # a right-padded completion
    labels = ids.masked_fill(attn == 0, -100)
    labels[:, :-5] = -100  # only the last five positions are the completion
    out = model(input_ids=ids, attention_mask=attn, labels=labels, fused_lm_head=True)
    (out.log_probs.sum() + 0.1 * out.entropy.sum()).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.log_probs.detach(), out.entropy.detach(), grads, rows


def test_compact_head_scores_the_completion_only_with_the_same_values_and_gradients(tiny_path, monkeypatch):
    # TRL's own choice (unwrapped, when an earlier test's GRPO run already applied the patch)
    original = getattr(trl_utils._use_triton, "__wrapped__", trl_utils._use_triton)
    lp_full, ent_full, g_full, rows_full = _run(tiny_path, monkeypatch, original)
    assert rows_full == [3 * 11]  # every shifted position, prompt and padding included
    monkeypatch.setattr(trl_utils, "_use_triton", original)
    assert compact_lm_head() and lm_head_is_compact()
    compact = trl_utils._use_triton
    lp, ent, g, rows = _run(tiny_path, monkeypatch, compact)
    assert rows == [5 + 5 + 2]  # the labelled positions only
    assert torch.allclose(lp, lp_full, atol=1e-5)
    assert torch.allclose(ent, ent_full, atol=1e-5)
    assert g.keys() == g_full.keys() and g
    for name in g:
        assert torch.allclose(g[name], g_full[name], atol=1e-5, rtol=1e-4), name
    assert compact_lm_head() and trl_utils._use_triton is compact  # idempotent: wrapped once


def test_compact_head_keeps_the_accelerator_choice(monkeypatch):
    monkeypatch.setattr(trl_utils, "_use_triton", lambda device: device.type == "cuda")
    assert compact_lm_head()
    assert trl_utils._use_triton(torch.device("cpu"))
    assert trl_utils._use_triton(torch.device("cuda"))
    assert not trl_utils._use_triton(torch.device("meta"))
