"""The pinned TRL contract factrl relies on: the rollout hook, and the env mask keeping
observation tokens out of both the policy loss and the KL (checked numerically)."""

import inspect

import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")


def test_trl_version_and_hook_are_what_factrl_was_built_for():
    assert trl.__version__ == "1.16.0", "factrl's rollout adapter is written against TRL 1.16.0"
    params = inspect.signature(trl.GRPOTrainer.__init__).parameters
    assert "rollout_func" in params


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    from datasets import Dataset

    from factrl.lm.tiny import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=1, hidden=32, heads=2)
    args = trl.GRPOConfig(
        output_dir=str(tmp_path_factory.mktemp("out")), beta=0.5, num_generations=2,
        per_device_train_batch_size=2, bf16=False, report_to=[], max_completion_length=8, loss_type="grpo",
    )
    t = trl.GRPOTrainer(
        model=str(path),
        reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["a", "b"]}),
        rollout_func=lambda prompts, trainer: {},
    )
    t.model.eval()
    return t


def _inputs(gen):
    B, P, T = 2, 3, 6
    return {
        "prompt_ids": torch.randint(5, 1000, (B, P), generator=gen),
        "prompt_mask": torch.ones(B, P, dtype=torch.long),
        "completion_ids": torch.randint(5, 1000, (B, T), generator=gen),
        "completion_mask": torch.ones(B, T, dtype=torch.long),
        # 1 = sampled by the model, 0 = observation inserted by the environment
        "tool_mask": torch.tensor([[1, 1, 0, 0, 1, 1], [1, 0, 0, 0, 1, 1]]),
        "advantages": torch.tensor([1.0, -0.5]),
        "old_per_token_logps": -torch.rand(B, T, generator=gen) * 3,
        "ref_per_token_logps": -torch.rand(B, T, generator=gen) * 3,
    }


def test_masked_tokens_add_neither_policy_loss_nor_kl(trainer):
    gen = torch.Generator().manual_seed(0)
    base = _inputs(gen)
    masked = base["tool_mask"] == 0
    loss = trainer._compute_loss(trainer.model, base).item()

    # Changing the reference or behaviour logprobs at observation positions: no effect.
    for key in ("ref_per_token_logps", "old_per_token_logps"):
        x = dict(base)
        x[key] = base[key].clone()
        x[key][masked] -= 5.0
        assert trainer._compute_loss(trainer.model, x).item() == pytest.approx(loss, abs=1e-7), key

    # The same change at one model-token position does change the loss.
    for key in ("ref_per_token_logps", "old_per_token_logps"):
        x = dict(base)
        x[key] = base[key].clone()
        x[key][0, 0] -= 5.0
        assert abs(trainer._compute_loss(trainer.model, x).item() - loss) > 1e-4, key


def test_no_gradient_flows_from_observation_positions(trainer):
    """Gradient of the loss w.r.t. the per-token log-probs is exactly zero where mask=0."""
    gen = torch.Generator().manual_seed(1)
    base = _inputs(gen)
    captured = {}
    original = trainer._get_per_token_logps_and_entropies

    def spy(*args, **kwargs):
        logps, ent, aux = original(*args, **kwargs)
        logps.retain_grad()
        captured["logps"] = logps
        return logps, ent, aux

    trainer._get_per_token_logps_and_entropies = spy
    try:
        trainer.model.zero_grad()
        trainer._compute_loss(trainer.model, base).backward()
    finally:
        trainer._get_per_token_logps_and_entropies = original
    grad = captured["logps"].grad
    masked = base["tool_mask"] == 0
    assert torch.all(grad[masked] == 0)
    assert torch.all(grad[~masked] != 0)
