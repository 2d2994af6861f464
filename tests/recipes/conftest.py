"""Fixtures of the recipe tests."""

import pytest


@pytest.fixture
def fake_evaluation(monkeypatch):
    """No model is loaded and no episode run: each call of ``factrl.evaluate.evaluate`` is
    recorded (its keyword arguments, the claims and the output directory, in the list this
    fixture returns) and leaves an empty ``metrics.json``, so a stage counts as evaluated."""
    import factrl.evaluate
    import factrl.lm.loader

    calls = []

    class _LM:
        def runtime_info(self):
            return {}

    def evaluate(claims, make_env, lm, out_dir, **kw):
        calls.append(dict(kw, claims=list(claims), out_dir=out_dir))
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "metrics.json").write_text("{}")
        return {}

    monkeypatch.setattr(factrl.evaluate, "evaluate", evaluate)
    monkeypatch.setattr(factrl.lm.loader, "load_lm", lambda *a, **k: _LM())
    return calls
