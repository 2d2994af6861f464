"""The trained embedded agent's recipe moved into the package: ``factrl train
embedded-agent`` (:mod:`factrl.recipes.embedded_agent`). This wrapper keeps the old
command line working:

    python benchmarks/embedded_agent.py --out runs/agent teach sft
"""

from __future__ import annotations

import sys

from factrl.cli import main

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "train", "embedded-agent", *sys.argv[1:]]
    sys.exit(main())
