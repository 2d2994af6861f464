"""How long the factworld generator takes (a speed figure for docs/benchmarks.md, not a
test): a world of ``--entities`` entities and ``--claims`` claims, generated in memory
``--repeat`` times; prints the best and median seconds.

    PYTHONPATH=src .venv/bin/python benchmarks/factworld_generation.py [--entities 500 --claims 3000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from factrl.datasets.factworld import WorldConfig, generate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entities", type=int, default=500)
    ap.add_argument("--claims", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    times = []
    for i in range(a.repeat):
        t0 = time.perf_counter()
        generate(WorldConfig(seed=2 + i, entities=a.entities, claims=a.claims))
        times.append(time.perf_counter() - t0)
    print(json.dumps({"entities": a.entities, "claims": a.claims, "best_s": round(min(times), 3),
                      "median_s": round(statistics.median(times), 3)}))


if __name__ == "__main__":
    main()
