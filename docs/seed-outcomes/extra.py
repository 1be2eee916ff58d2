import contextlib
import io
import sys

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
with contextlib.redirect_stdout(io.StringIO()):
    import analyze as A
rr = A.runs(False)
presets = A.presets  # the presets of their day, one list for both scripts
groups = {
    "presets": [x for x in rr if x[0]["id"] in presets],
    "screens": [x for x in rr if x[0]["id"] not in presets],
    "today": [x for x in rr if x[0]["id"] in ("zen3-upd12", "xeon-upd12")],
}
for cpu in ("Z3", "XE", "Z5", "XA", "H100"):
    groups[cpu] = [x for x in rr if x[0]["cpu"] == cpu]
for g, sub in groups.items():
    out = []
    for capmin, by in ((1.5, 1.0), (1.5, 1.5), (1.0, 1.0)):
        k, n, el = A.pool(sub, capmin, by)
        if n:
            lo, hi = A.cp(k, n)
            wl, wh = A.wilson(k, n)
            out.append(
                f"cap>={capmin} by {by}: {k}/{n}={k / n:.2f} CP {lo:.2f}-{hi:.2f} W {wl:.2f}-{wh:.2f} sets {len(set(s['id'] for s, r in el))}"
            )
    print(g, " || ".join(out))
for g, (k, n) in {
    "pool15by15": (34, 73),
    "pool15by10": (18, 73),
    "today15": (10, 13),
    "today10": (7, 13),
    "presets15": (26, 46),
    "strict15by15": (26, 64),
}.items():
    lo, hi = A.cp(k, n)
    p = k / n
    print(g, f"p={p:.3f} p5={p**5:.4f} lo5={lo**5:.4f} hi5={hi**5:.4f}")
