"""How long ``import mxkit.core`` takes, next to ``import numpy`` and ``import pluggy``.

Each import runs in a fresh interpreter (``python -X importtime`` would perturb it), best of
N runs, minus the cost of starting an empty interpreter. The target for mxkit.core is under
50 ms.
"""

from __future__ import annotations

import subprocess
import sys
import time

RUNS = 7
STATEMENTS = {
    "(empty interpreter)": "pass",
    "import mxkit.core": "import mxkit.core",
    "from mxkit import mx": "from mxkit import mx",
    "import pluggy": "import pluggy",
    "import numpy": "import numpy",
}


def best_seconds(statement: str) -> float:
    best = float("inf")
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", statement], check=True)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    times = {label: best_seconds(code) for label, code in STATEMENTS.items()}
    base = times.pop("(empty interpreter)")
    numpy_ms = (times["import numpy"] - base) * 1000
    print(f"{'import':<24}{'ms (minus empty start)':>24}{'x numpy':>10}")
    for label, seconds in times.items():
        ms = (seconds - base) * 1000
        print(f"{label:<24}{ms:>24.1f}{ms / numpy_ms:>10.2f}")
    print(f"(empty interpreter start: {base * 1000:.1f} ms; target for import mxkit.core: < 50 ms)")


if __name__ == "__main__":
    main()
