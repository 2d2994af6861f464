"""NonFiniteGradGuard: a step with NaN/inf gradients is skipped, and a run of them stops training."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from factrl.train.callbacks import NonFiniteGradGuard


class _State:
    global_step = 0


class _Control:
    should_training_stop = False


def _model(bad: bool) -> torch.nn.Module:
    m = torch.nn.Linear(3, 2)
    out = m(torch.ones(1, 3)).sum()
    out.backward()
    if bad:
        m.weight.grad[0, 0] = float("nan")
    return m


def test_finite_gradients_pass_untouched():
    guard, control = NonFiniteGradGuard(), _Control()
    m = _model(bad=False)
    guard.on_pre_optimizer_step(None, _State(), control, model=m)
    assert m.weight.grad is not None and guard.skipped == 0 and not control.should_training_stop


def test_nonfinite_gradients_are_dropped_so_the_optimiser_leaves_the_weights():
    guard, control = NonFiniteGradGuard(patience=2), _Control()
    m = _model(bad=True)
    before = m.weight.detach().clone()
    opt = torch.optim.AdamW(m.parameters(), lr=0.1)
    guard.on_pre_optimizer_step(None, _State(), control, model=m)
    opt.step()
    assert torch.equal(m.weight, before) and torch.isfinite(m.weight).all()
    assert guard.skipped == 1 and not control.should_training_stop
    logs = {"loss": 0.1}
    guard.on_log(None, _State(), control, logs=logs)
    assert logs["skipped_nonfinite_steps"] == 1
    guard.on_pre_optimizer_step(None, _State(), control, model=_model(bad=True))
    assert control.should_training_stop  # two in a row
