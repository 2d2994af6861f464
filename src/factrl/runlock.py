"""Moved to :mod:`factrl.runs.lock` (the run directory's package); this path re-exports
it for code written against it."""

from factrl.runs.lock import *  # noqa: F401,F403
from factrl.runs.lock import __all__  # noqa: F401
