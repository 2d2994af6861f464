"""Fixtures of the report tests (helpers: report_runs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from report_runs import write_two_runs


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Two run directories of the same four claims (the first with confidences)."""
    return write_two_runs(tmp_path)
