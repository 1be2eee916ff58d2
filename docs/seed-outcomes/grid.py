import itertools
import random
import sys

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import data

by_id = {s["id"]: s for s in data.SETS}
GRIDS = {
    "Z3": [
        ("64z", "zen3-64-z"),
        ("64v", "zen3-64-v"),
        ("m16", "zen3-64-m16"),
        ("128x2", "zen3-5seeds"),
        ("mb32", "zen3-mb32"),
        ("lr5", "zen3-screens-lr5"),
        ("eps01", "zen3-screens-eps01"),
        ("nodec", "zen3-nodecay"),
        ("128x4", ("zen3-4epochs", "zen3-e128")),
        ("upd12", "zen3-upd12"),
        ("follow", "zen3-follow"),
        ("eps5", "zen3-eps5"),
        ("epsrise", "zen3-epsrise"),
    ],
    "XE": [
        ("4ep1.5", "xeon-4epochs"),
        ("base", "xeon-base"),
        ("e64", "xeon-e64"),
        ("lrsc", "xeon-lr-score"),
        ("e32", "L:xeon-e32"),
        ("lr5s", "xeon-e64-lr5s"),
        ("eps01", "L:xeon-eps01"),
        ("epsfall", "L:xeon-epsfall"),
        ("epshump", "L:xeon-epshump"),
        ("lam80", "L:xeon-lam80"),
        ("upd25", "L:xeon-upd25"),
        ("upd12", "xeon-upd12"),
        ("lr7", "L:xeon-lr7"),
        ("mb16", "L:xeon-mb16"),
    ],
    "Z5": [
        ("32x4", "zen5-32x4"),
        ("eps400k", "L:zen5-eps400k"),
        ("64-2thr", "zen5-64"),
        ("64-1thr", "L:zen5-64-1thr"),
    ],
}
THR = {"Z3": "cap", "XE": 1.0, "Z5": "cap"}


def cells(cpu, thr, strict):
    M = {}
    txt = {}
    for col, ids in GRIDS[cpu]:
        ids = ids if isinstance(ids, tuple) else (ids,)
        for i in ids:
            for r in by_id[i]["runs"]:
                if not isinstance(r["seed"], int):
                    continue
                f = r["flags"].split()
                t = (
                    (f"{r['solved']:.2f}" if r["solved"] is not None else "no")
                    + ("*" if "pre" in f else "")
                    + ("=" if "dup" in f else "")
                )
                txt[(r["seed"], col)] = t
                if "dup" in f or (strict and "pre" in f):
                    continue
                if thr == "cap":
                    y = r["solved"] is not None
                else:
                    if r["cap"] < thr and not (r["solved"] is not None and r["solved"] <= thr):
                        continue
                    y = r["solved"] is not None and r["solved"] <= thr
                M[(r["seed"], col)] = int(y)
    return M, txt


def T(M, cols):
    seeds = sorted(set(s for s, c in M))
    t = 0
    for s in seeds:
        ys = [M[(s, c)] for c in cols if (s, c) in M]
        for a, b in itertools.combinations(ys, 2):
            t += a == b
    return t


def perm(M, cols, rng):
    P = {}
    for c in cols:
        ks = [k for k in M if k[1] == c]
        vals = [M[k] for k in ks]
        rng.shuffle(vals)
        P.update(dict(zip(ks, vals, strict=True)))
    return P


def pairs(M, cols):
    cnt = {(1, 1): 0, (1, 0): 0, (0, 1): 0, (0, 0): 0}
    for s in set(s for s, c in M):
        ys = [M[(s, c)] for c in cols if (s, c) in M]
        for a, b in itertools.permutations(ys, 2):
            cnt[(a, b)] += 1
    return cnt


rng = random.Random(1)
for strict in (False, True):
    tot_obs = 0
    per = {}
    Ms = {}
    for cpu in GRIDS:
        cols = [c for c, _ in GRIDS[cpu]]
        for thr in [THR[cpu]] + ([1.5] if cpu == "Z3" else []):
            M, txt = cells(cpu, thr, strict)
            Ms[(cpu, thr)] = (M, cols)
            tobs = T(M, cols)
            N = 20000
            ge = sum(T(perm(M, cols, rng), cols) >= tobs for _ in range(N))
            exp = sum(T(perm(M, cols, rng), cols) for _ in range(2000)) / 2000
            pc = pairs(M, cols)
            ps = pc[(0, 1)] / (pc[(0, 1)] + pc[(0, 0)]) if pc[(0, 1)] + pc[(0, 0)] else float("nan")
            pss = (
                pc[(1, 1)] / (pc[(1, 1)] + pc[(1, 0)]) if pc[(1, 1)] + pc[(1, 0)] else float("nan")
            )
            print(
                f"strict={strict} {cpu} thr={thr}: cells {len(M)}, solved {sum(M.values())}, concordant pairs obs {tobs} vs {exp:.1f} expected under independence, perm p={ge / N:.3f}; P(solve|same seed failed under another recipe)={ps:.2f} ({pc[(0, 1)]}/{pc[(0, 1)] + pc[(0, 0)]}), P(solve|solved elsewhere)={pss:.2f} ({pc[(1, 1)]}/{pc[(1, 1)] + pc[(1, 0)]})"
            )
    # combined (Z3 cap, XE 1.0, Z5 cap)
    keys = [("Z3", "cap"), ("XE", 1.0), ("Z5", "cap")]
    tobs = sum(T(*Ms[k]) for k in keys)
    N = 20000
    ge = sum(
        sum(T(perm(Ms[k][0], Ms[k][1], rng), Ms[k][1]) for k in keys) >= tobs for _ in range(N)
    )
    print(f"strict={strict} combined perm p={ge / N:.3f}")
# print grids (txt, non-strict)
for cpu in GRIDS:
    cols = [c for c, _ in GRIDS[cpu]]
    M, txt = cells(cpu, THR[cpu], False)
    seeds = sorted(set(s for s, c in txt))
    print(f"\n{cpu}: | seed | " + " | ".join(cols) + " | solved/run |")
    for s in seeds:
        row = [txt.get((s, c), "") for c in cols]
        ys = [M[(s, c)] for c in cols if (s, c) in M]
        print(f"| {s} | " + " | ".join(row) + f" | {sum(ys)}/{len(ys)} |")
