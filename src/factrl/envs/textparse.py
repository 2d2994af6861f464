"""Moved to :mod:`factrl.protocol.text` (the text protocol is shared by environments,
rewards and metrics); this path re-exports it for code written against it."""

from factrl.protocol.text import *  # noqa: F401,F403
from factrl.protocol.text import __all__  # noqa: F401
