"""Model names → what ``from_pretrained`` loads (trainers pass this, not a loaded model)."""

from pathlib import Path

import pytest

from factrl.lm.loader import LMLoadError, resolve_model_path


def test_hub_ids_pass_through_and_directories_resolve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_model_path("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    (tmp_path / "model").mkdir()
    monkeypatch.chdir(tmp_path)
    assert resolve_model_path("model") == str(tmp_path / "model")
    (tmp_path / "weights.bin").write_text("x")
    with pytest.raises(LMLoadError, match="is a file"):
        resolve_model_path("weights.bin")


@pytest.mark.parametrize("alias", ["smollm2", "embedded", "SmolLM2"])
def test_embedded_aliases_give_the_cached_model_directory(alias: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    embedded = pytest.importorskip("factrl.lm.embedded")
    monkeypatch.setattr(embedded, "ensure_embedded_model", lambda: tmp_path / "smollm2")
    assert resolve_model_path(alias) == str(tmp_path / "smollm2")
