import sys

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import data

INF = float("inf")

SRC = {
    "L:zen5-64-1thr": 'log "64 envs and 2 epochs against 32 envs and 4 epochs"',
    "L:zen5-eps400k": 'log "What is short of the issue\'s targets"',
    "L:xeon-e32": 'log "2026-11-27 (evening)"',
    "L:xeon-eps01": 'log "2026-11-27 (night)"',
    "L:xeon-epsfall": 'log "2026-11-27 (night)"',
    "L:xeon-epshump": 'log "2026-11-27 (late night)"',
    "L:xeon-lam80": 'log "Q(lambda) with lambda 0.8"',
    "L:xeon-upd25": 'log "Updates falling from a smoothed 0"',
    "L:xeon-lr7": 'log "2026-11-28 (third session)"',
    "L:xeon-mb16": 'log "Half the gradient samples"',
    "L:h100-ten": 'log "2026-11-27: the take-off, staying solved, and a first GPU"',
    "zen3-eps5": "runs/zen3-eps5/seeds.md",
    "zen3-epsrise": "runs/zen3-epsrise/seeds.md",
    "zen3-screens-lr5": "R#zen3-screens",
    "zen3-screens-eps01": "R#zen3-screens",
}
for s in data.SETS:
    rs = s["runs"]
    n = len(rs)
    caps = [r["cap"] for r in rs]
    ks = sum(r["solved"] is not None for r in rs)
    k10 = sum(r["solved"] is not None and r["solved"] <= 1.0 for r in rs)
    t = sorted(r["solved"] if r["solved"] is not None else INF for r in rs)
    med = t[n // 2] if n % 2 else (t[n // 2 - 1] + t[n // 2]) / 2
    capstr = (
        f"{min(caps):.2f}" if max(caps) - min(caps) < 0.005 else f"{min(caps):.2f}-{max(caps):.2f}"
    )
    if s["approx"]:
        capstr = "~" + capstr

    def cell(r):
        f = r["flags"].split()
        m = ("*" if "pre" in f else "") + ("=" if "dup" in f else "") + ("r" if "res" in f else "")
        v = f"{r['solved']:.2f}" if r["solved"] is not None else f"x{r['best']}"
        return f"{r['seed']}:{v}{m}"

    per = " ".join(cell(r) for r in rs)
    src = SRC.get(s["id"], "R#" + s["id"])
    name = s["id"] if src.startswith("R#" + s["id"]) else f"{s['id']} ({src})"
    mw = f"{'not' if med == INF else f'{med:.2f}'} / {'not by cap' if t[-1] == INF else f'{t[-1]:.2f}'}"
    print(f"| {name} | {s['cpu']} | {s['recipe']} | {capstr} | {n} | {ks} | {k10} | {mw} | {per} |")
