"""The ``nltk_data`` folder factrl builds offline (WordNet for METEOR, Punkt for
``word_tokenize``) and the atomic file writes both use."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["nltk_data_dir", "prepared_root", "put_first_on_path", "write_if_changed"]

# The nltk_data folders prepared in this process (by ensure_wordnet / ensure_punkt), last
# one last: later preparations write beside the first.
_prepared: list[Path] = []


def nltk_data_dir() -> Path:
    """``$FACTRL_CACHE/nltk_data`` (default ``~/.cache/factrl/nltk_data``)."""
    env = os.environ.get("FACTRL_CACHE")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "factrl") / "nltk_data"


def prepared_root() -> Path | None:
    """The ``nltk_data`` folder this process prepared most recently, or None."""
    return _prepared[-1] if _prepared else None


def put_first_on_path(root: Path) -> None:
    """Put ``root`` first on ``nltk.data.path`` and remember it as prepared."""
    import nltk

    if str(root) in nltk.data.path:
        nltk.data.path.remove(str(root))
    nltk.data.path.insert(0, str(root))
    if root in _prepared:
        _prepared.remove(root)
    _prepared.append(root)


def write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it already holds exactly that; atomic (a
    concurrent reader sees the old or the new file) and a regular file (NLTK refuses data
    files that are links)."""
    try:
        if path.is_file() and not path.is_symlink() and path.read_text(encoding="utf-8") == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8", newline="")
    os.replace(tmp, path)
