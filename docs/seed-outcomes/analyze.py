import math
import sys

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import data
import numpy as np
from scipy.stats import beta, binom, norm

INF = float("inf")


def fl(r):
    return r["flags"].split()


def cp(k, n, conf=0.90):
    a = (1 - conf) / 2
    lo = 0.0 if k == 0 else beta.ppf(a, k, n - k + 1)
    hi = 1.0 if k == n else beta.ppf(1 - a, k + 1, n - k)
    return lo, hi


def wilson(k, n, conf=0.90):
    z = norm.ppf(1 - (1 - conf) / 2)
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return c - h, c + h


def fmt(x):
    return "not" if x == INF else f"{x:.2f}"


# ---- 1. per-set table
print("## table1")
for s in data.SETS:
    rs = s["runs"]
    n = len(rs)
    caps = [r["cap"] for r in rs]
    ks = sum(r["solved"] is not None for r in rs)
    el10 = [r for r in rs if r["cap"] >= 1.0]
    k10 = sum(r["solved"] is not None and r["solved"] <= 1.0 for r in el10)
    t = sorted(r["solved"] if r["solved"] is not None else INF for r in rs)
    med = float(np.median(t)) if n % 2 else (t[n // 2 - 1] + t[n // 2]) / 2
    worst = t[-1]
    capstr = (
        f"{min(caps):.2f}" if max(caps) - min(caps) < 0.005 else f"{min(caps):.2f}-{max(caps):.2f}"
    )
    if s["approx"]:
        capstr = "~" + capstr
    per = ", ".join(
        f"s{r['seed']} {r['solved']:.2f}"
        if r["solved"] is not None
        else f"s{r['seed']} x{r['best']}"
        for r in rs
    )
    fls = sorted(set(f for r in rs for f in fl(r)))
    print(
        f"| {s['id']} | {s['cpu']} | {s['recipe']} | {capstr} | {n} | {ks} | {k10}/{len(el10)} | {'not' if med == INF else f'{med:.2f}'} | {'not by cap' if worst == INF else f'{worst:.2f}'} | {per} | {' '.join(fls)} |"
    )


# ---- 2. pools
def runs(strict=False):
    out = []
    for s in data.SETS:
        for r in s["runs"]:
            f = fl(r)
            if "dup" in f or "noP" in f:
                continue
            if strict and "pre" in f:
                continue
            out.append((s, r))
    return out


def pool(rr, capmin, by):
    el = [(s, r) for s, r in rr if r["cap"] >= capmin - 1e-9]
    k = sum(r["solved"] is not None and r["solved"] <= by + 1e-9 for s, r in el)
    return k, len(el), el


print("\n## pools")
res = {}
for name, strict in (("all distinct runs", False), ("strict: no shared path prefix", True)):
    rr = runs(strict)
    for capmin in (1.5, 1.0):
        for by in (1.0, 1.5):
            if by > capmin:
                continue
            k, n, el = pool(rr, capmin, by)
            lo, hi = cp(k, n)
            wl, wh = wilson(k, n)
            res[(strict, capmin, by)] = (k, n, lo, hi)
            nsets = len(set(s["id"] for s, r in el))
            print(
                f"{name} | cap>={capmin} | by {by} | {k}/{n} = {k / n:.3f} | CP90 {lo:.3f}-{hi:.3f} | Wilson90 {wl:.3f}-{wh:.3f} | sets {nsets}"
            )
# per-CPU / subsets for cap>=1.5
rr = runs(False)
for cpu in ("Z3", "XE", "Z5", "XA", "H100"):
    sub = [(s, r) for s, r in rr if s["cpu"] == cpu]
    for by in (1.0, 1.5):
        k, n, _ = pool(sub, 1.5, by)
        if n:
            print(f"cpu {cpu} cap>=1.5 by {by}: {k}/{n} CP90 {cp(k, n)[0]:.2f}-{cp(k, n)[1]:.2f}")
    k, n, _ = pool(sub, 1.0, 1.0)
    if n:
        print(f"cpu {cpu} cap>=1.0 by 1.0: {k}/{n}")
# today's preset
for ids in (("zen3-upd12", "xeon-upd12"),):
    sub = [(s, r) for s, r in rr if s["id"] in ids]
    for by in (1.0, 1.5):
        k, n, _ = pool(sub, 1.5, by)
        print(f"today's preset {ids} by {by}: {k}/{n} CP90 {cp(k, n)[0]:.2f}-{cp(k, n)[1]:.2f}")
# presets of their day (not screens)
presets = (
    "zen5-32x4",
    "zen5-64",
    "xeon-64",
    "zen3-64-z",
    "zen3-64-v",
    "zen3-5seeds",
    "zen3-4epochs",
    "xeon-4epochs",
    "xeon-base",
    "h100-preset",
    "xeon-e64-lr5s",
    "xeon-upd12",
    "zen3-upd12",
)
sub = [(s, r) for s, r in rr if s["id"] in presets]
for capmin, by in ((1.5, 1.0), (1.5, 1.5), (1.0, 1.0)):
    k, n, _ = pool(sub, capmin, by)
    print(
        f"presets-of-the-day cap>={capmin} by {by}: {k}/{n} = {k / n:.2f} CP90 {cp(k, n)[0]:.2f}-{cp(k, n)[1]:.2f}"
    )
sub = [(s, r) for s, r in rr if s["id"] not in presets]
for capmin, by in ((1.5, 1.0), (1.5, 1.5), (1.0, 1.0)):
    k, n, _ = pool(sub, capmin, by)
    print(f"screens cap>={capmin} by {by}: {k}/{n} = {k / n:.2f}")
# list membership of the 1.5 pool
k, n, el = pool(runs(False), 1.5, 1.5)
print("1.5 pool sets:", sorted(set(s["id"] for s, r in el)))
k, n, el = pool(runs(False), 1.0, 1.0)
print("1.0 pool sets:", sorted(set(s["id"] for s, r in el)))

# ---- 4. screening arithmetic
print("\n## screening")
for key in ((False, 1.5, 1.5), (False, 1.5, 1.0), (False, 1.0, 1.0), (True, 1.5, 1.5)):
    k, n, lo, hi = res[key]
    p = k / n
    print(
        key,
        f"p={p:.3f} p^5={p**5:.3f} [{lo**5:.3f}, {hi**5:.3f}]  P(>=4/5)={1 - binom.cdf(3, 5, p):.3f}",
    )
for p in (0.5, 0.6, 0.7, 0.8, 0.9, 0.95):
    print(
        f"p={p}: p^5={p**5:.3f}, P(>=4 of 5)={1 - binom.cdf(3, 5, p):.3f}, P(all 7 of 7)={p**7:.3f}"
    )
# two-arm normal approx
a, b = 0.05, 0.20
p1, p2 = 0.7, 0.9
pb = (p1 + p2) / 2
za, zb = norm.ppf(1 - a), norm.ppf(1 - b)
n_norm = (
    za * math.sqrt(2 * pb * (1 - pb)) + zb * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))
) ** 2 / (p1 - p2) ** 2
n_cc = n_norm / 4 * (1 + math.sqrt(1 + 4 / (n_norm * abs(p1 - p2)))) ** 2
print(f"two-arm normal approx n/arm = {n_norm:.1f}; with Fleiss continuity correction = {n_cc:.1f}")


# exact: one-sided Fisher exact test power (enumerate)
def fisher_power(n, p1=0.7, p2=0.9, alpha=0.05):
    pw = 0.0
    b1 = binom.pmf(np.arange(n + 1), n, p1)
    b2 = binom.pmf(np.arange(n + 1), n, p2)
    # one-sided: arm2 (candidate) better. Use hypergeometric p-value P(X2 >= x2 | total)
    from scipy.stats import hypergeom

    for x1 in range(n + 1):
        for x2 in range(n + 1):
            pr = b1[x1] * b2[x2]
            if pr < 1e-12:
                continue
            t = x1 + x2
            pv = hypergeom.sf(x2 - 1, 2 * n, t, n)  # P(X>=x2), X ~ successes in arm2
            if pv <= alpha:
                pw += pr
    return pw


for n in (20, 30, 40, 45, 50, 55, 60, 62, 65, 70):
    print("fisher n/arm", n, round(fisher_power(n), 3))
# one-sample exact binomial: H0 p=0.7 vs p=0.9
for n in range(5, 40):
    # smallest c with P(X>=c | 0.7) <= 0.05
    c = next(c for c in range(n + 2) if 1 - binom.cdf(c - 1, n, 0.7) <= 0.05)
    pw = 1 - binom.cdf(c - 1, n, 0.9)
    if pw >= 0.8:
        print(
            f"one-sample exact: n={n}, reject if >= {c} solved, size {1 - binom.cdf(c - 1, n, 0.7):.3f}, power {pw:.3f}"
        )
        break
zz = ((za * math.sqrt(0.7 * 0.3) + zb * math.sqrt(0.9 * 0.1)) / 0.2) ** 2
print(f"one-sample normal approx n = {zz:.1f}")
