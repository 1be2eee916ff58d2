import math
import random
import sys

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import numpy as np
from grid import GRIDS, T, cells, perm

rng = random.Random(7)
nrng = np.random.default_rng(7)
keys = [("Z3", "cap"), ("XE", 1.0), ("Z5", "cap")]
Ms = {}
for cpu, thr in keys:
    M, _ = cells(cpu, thr, True)
    cols = [c for c, _ in GRIDS[cpu]]
    Ms[cpu] = (M, cols)


def sim_p(sigma, nperm=200):
    sims = {}
    for cpu, (M, cols) in Ms.items():
        rate = {
            c: min(
                max(
                    np.mean([M[k] for k in M if k[1] == c]) if any(k[1] == c for k in M) else 0.5,
                    0.08,
                ),
                0.92,
            )
            for c in cols
        }
        seeds = sorted(set(s for s, c in M))
        u = {s: nrng.normal(0, sigma) for s in seeds}
        S = {}
        for s, c in M:
            lg = math.log(rate[c] / (1 - rate[c])) + u[s]
            S[(s, c)] = int(nrng.random() < 1 / (1 + math.exp(-lg)))
        sims[cpu] = (S, cols)
    tobs = sum(T(S, cols) for S, cols in sims.values())
    ge = sum(
        sum(T(perm(S, cols, rng), cols) for S, cols in sims.values()) >= tobs for _ in range(nperm)
    )
    return (ge + 1) / (nperm + 1)


for sigma in (0.0, 1.0, 2.0, 3.0):
    ps = [sim_p(sigma) for _ in range(150)]
    print(
        f"seed-effect SD {sigma} (logit): power at one-sided 5% = {np.mean([p <= 0.05 for p in ps]):.2f}"
    )
