"""Shared fixtures: the path of the real benchmark data (tests using it skip when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from _support import REPO, WordOverlapRetriever  # noqa: F401 (re-exported for tests)

try:  # property tests time nothing: a loaded box's slow example is no failure
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("factrl", deadline=None)
    _hypothesis_settings.load_profile("factrl")
except ImportError:  # pragma: no cover - hypothesis is a dev dependency
    pass

SHARED_DATA = Path(os.environ.get("FACTRL_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"benchmark data not found at {SHARED_DATA}")
    return SHARED_DATA
