"""Moved to :mod:`factrl.protocol.tags` (the text protocol is shared by environments,
rewards and metrics); this path re-exports it for code written against it."""

from factrl.protocol.tags import *  # noqa: F401,F403
from factrl.protocol.tags import __all__  # noqa: F401
