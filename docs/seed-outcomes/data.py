# Per-run data for the PQN pong-fast family. Agent steps in millions (M); emulator frames = 4x.
# cap = agent steps at which the run would have stopped unsolved ("~" = FPS x time cap, approximate).
# solved = agent steps at the smoothed 18, None if not solved by cap. best = best smoothed (unsolved).
# flags: dup = same run as another row (deterministic replay) -> never pooled;
#        pre = shares its path with an earlier run of the same seed/CPU up to a point (dropped in "strict");
#        res = resumed mid-run (games restarted); noP = listed but not pooled.
SETS = []  # (id, source, cpu, recipe, approxcap, runs)


def S(id, src, cpu, recipe, runs, approx=False):
    SETS.append(
        dict(
            id=id,
            src=src,
            cpu=cpu,
            recipe=recipe,
            approx=approx,
            runs=[
                dict(
                    zip(
                        ("seed", "cap", "solved", "best", "flags"),
                        r + (() if len(r) == 5 else ("",)),
                        strict=True,
                    )
                )
                for r in runs
            ],
        )
    )


R = "results.md#"
L = "log/pong-fast.md: "
RUN = "runs/"
# ---- AMD EPYC Zen 5 (bf16, 2 cores), 2026-11-23
S(
    "zen5-32x4",
    R + "zen5-32x4",
    "Z5",
    "32 envs x 32, 4 ep x 4 mb (then preset), time caps 13-20 min",
    [
        (0, 1.696 * 1.2, 1.12, None),
        (1, 1.770 * 1.2, None, "+14.0"),
        (2, 1.639 * 0.9, 1.07, None),
        (3, 1.33, None, "+1.1"),
        (4, 1.32, None, "+4.2"),
    ],
    approx=True,
)
S(
    "zen5-shape",
    R + "zen5-shape",
    "Z5",
    "seed 0 variants of 32x32: A 16x64+eps .01, P parallel, F fp32",
    [("0A", 1.77, 1.77, None), ("0P", 1.97, 1.97, None), ("0F", 1.206 * 0.96, None, "+17.8")],
    approx=True,
)
S(
    "zen5-64",
    R + "zen5-64",
    "Z5",
    "64 envs x 32, 2 ep x 8 mb (preset then), 2 threads, 13-15 min caps",
    [
        (0, 2.537 * 0.9, 1.52, None),
        (1, 2.595 * 0.9, 1.63, None),
        (2, 2.31, None, "+17.7"),
        (3, 2.617 * 0.9, 1.86, None),
        (4, 2.494 * 0.9, 1.79, None),
        (5, 2.712 * 0.78, None, "+0.2"),
        (6, 2.801 * 0.78, None, "-13.8"),
    ],
    approx=True,
)
S(
    "L:zen5-64-1thr",
    L + '"64 envs and 2 epochs against 32 envs and 4 epochs"',
    "Z5",
    "zen5-64 recipe on one pinned thread (1320 s)",
    [(3, 2.23, None, "~+16.7"), (4, 2.26, None, "-8e")],
)
S(
    "L:zen5-eps400k",
    L + '"What is short of the issue\'s targets"',
    "Z5",
    "32x32 recipe, epsilon decay over 400k (not 200k), 1 thread",
    [
        (3, 1.30, None, "+3.4e", "res"),
        (4, 1.30, None, "-5.4e", "res"),
        (0, 1.30, 1.261, None),
        (2, 1.26, None, "+12.8e"),
    ],
    approx=True,
)
# ---- Intel Xeon with AMX (bf16), 2026-11-25
S(
    "xeon-64",
    R + "xeon-64",
    "XA",
    "64 envs x 32, 2 ep x 8 mb (preset then), 3M cap",
    [(0, 3.0, None, "+16.9"), (1, 3.0, None, "+17.0")],
)
S(
    "xeon-64-levers",
    R + "xeon-64-levers",
    "XA",
    "xeon-64 + E: epsilon .01 / S: sticky actions .25",
    [("0E", 3.0, None, "+17.1"), ("0S", 3.0, None, "+12.8")],
)
# ---- AMD EPYC Zen 3 (fp32, 2 cores)
S(
    "zen3-64-z",
    R + "zen3-64-z",
    "Z3",
    "64 envs x 32, 2 ep x 8 mb (preset then), 30 min, 2 threads",
    [(0, 2.20, None, "+16.5"), (1, 0.948 * 1.8, 1.38, None)],
    approx=True,
)
S(
    "zen3-64-v",
    R + "zen3-64-v",
    "Z3",
    "as zen3-64-z, targets from actor values (same math), slow host",
    [(0, 1.40, None, "-13.7"), (1, 1.67, None, "+11.6")],
)
S(
    "zen3-64-m16",
    R + "zen3-64-m16",
    "Z3",
    "64 envs, 2 ep x 16 mb of 128, 30 min",
    [(0, 1.74, None, "+17.9"), (1, 1.73, None, "+8.0")],
)
S(
    "zen3-5seeds",
    R + "zen3-5seeds",
    "Z3",
    "128 envs x 32, 2 ep x 16 mb (preset 11-25); s0-1 = zen3-128",
    [
        (0, 1.571 * 1.8, 1.178, None),
        (1, 1.611 * 1.8, 1.548, None),
        (2, 1.5, 1.453, None),
        (3, 2.0, 1.537, None),
        (4, 2.0, None, "+17.5"),
    ],
    approx=True,
)
S(
    "zen3-mb32",
    R + "zen3-mb32",
    "Z3",
    "zen3-5seeds + pqn.minibatches=32 (mb 128)",
    [(4, 1.5, 0.93, None), (1, 1.5, None, "+2.3")],
)
S(
    "zen3-screens-lr5",
    R + "zen3-screens",
    "Z3",
    "zen3-5seeds + lr 5e-4",
    [(1, 1.5, None, "+12.1"), (3, 1.5, None, "+1.1")],
)
S(
    "zen3-screens-eps01",
    R + "zen3-screens",
    "Z3",
    "zen3-5seeds + epsilon_final .01",
    [(4, 1.5, None, "-12.0"), (3, 1.29, None, "+0.8@1.29")],
)
S(
    "zen3-nodecay",
    R + "zen3-nodecay",
    "Z3",
    "zen3-5seeds + pqn.lr_decay=false",
    [(0, 1.5, None, "+14.8"), (1, 1.5, 1.26, None)],
)
S(
    "zen3-4epochs",
    R + "zen3-4epochs",
    "Z3",
    "128 envs x 32, 4 ep x 16 mb, lr 2.5e-4 (preset 11-26)",
    [
        (0, 1.5, 0.996, None),
        (1, 1.5, 0.926, None),
        (2, 1.5, 1.242, None),
        (3, 1.5, 1.148, None),
        (4, 1.5, 0.996, None),
    ],
)
S(
    "zen3-e128",
    R + "zen3-e128",
    "Z3",
    "zen3-4epochs recipe on 11-28 code",
    [(4, 1.5, 0.996, None, "dup"), (5, 1.5, None, "+5.4"), (6, 1.5, None, "+3.3")],
)
S(
    "zen3-upd12",
    R + "zen3-upd12",
    "Z3",
    "today's preset (64 envs, lr 5e-4 falling, updates falling from 12)",
    [
        (0, 1.5, 1.155, None),
        (1, 1.5, 0.759, None),
        (2, 1.5, 1.467, None),
        (3, 1.5, 0.730, None),
        (4, 1.5, None, "+17.95"),
        (5, 1.5, 0.986, None),
        (6, 1.5, None, "+16.8"),
    ],
)
S(
    "zen3-follow",
    R + "zen3-follow",
    "Z3",
    "zen3-upd12 + pqn.follow_greedy",
    [(2, 1.5, 1.486, None, "pre"), (3, 1.5, 0.808, None, "pre"), (4, 1.5, None, "+17.4", "pre")],
)
S(
    "zen3-eps5",
    RUN + "zen3-eps5/seeds.md",
    "Z3",
    "zen3-upd12 + dqn.adam_eps=1e-5",
    [(4, 1.5, None, "-13.3"), (5, 1.5, None, "+17.6"), (6, 1.5, 0.927, None)],
)
S(
    "zen3-epsrise",
    RUN + "zen3-epsrise/seeds.md",
    "Z3",
    "zen3-upd12 + pqn.adam_eps_at_stop=1e-5 (s5 running, s4 stopped)",
    [(6, 1.5, 1.269, None, "pre")],
)
# ---- Intel Xeon without AMX (family 6 model 207), 2026-11-27/28
S(
    "xeon-4epochs",
    R + "xeon-4epochs",
    "XE",
    "128 envs 4 ep (preset 11-27), lr decay over 1.5M",
    [(0, 1.0, None, "-1.1"), (1, 1.0, None, "+11.8")],
)
S(
    "xeon-base",
    R + "xeon-base",
    "XE",
    "128 envs x 32, 4 ep x 16 mb (preset 11-27)",
    [
        (0, 1.0, None, "+16.9"),
        (1, 1.0, None, "+13.3"),
        (2, 1.0, None, "-6.9"),
        (3, 1.0, None, "+17.7"),
        (4, 1.0, None, "+16.7"),
    ],
)
S(
    "xeon-e64",
    R + "xeon-e64",
    "XE",
    "xeon-base + 64 envs x 8 mb",
    [
        (0, 1.0, None, "+17.5"),
        (1, 1.0, None, "+17.7"),
        (2, 1.0, None, "+15.8"),
        (3, 1.0, None, "+12.3"),
        (4, 1.0, None, "+16.5"),
    ],
)
S(
    "xeon-lr-score",
    R + "xeon-lr-score",
    "XE",
    "xeon-base + lr 5e-4 falling with score, decay over 1.0M",
    [
        (0, 1.0, None, "+17.3"),
        (1, 1.0, 0.846, None),
        (2, 1.0, None, "+3.7"),
        (3, 1.0, None, "+14.3"),
        (4, 1.0, None, "-4.8", "res"),
    ],
)
S(
    "L:xeon-e32",
    L + '"2026-11-27 (evening)"',
    "XE",
    "xeon-base + 32 envs x 4 mb",
    [(0, 1.0, None, "-17.9"), (1, 1.0, None, "+14.6")],
)
S(
    "xeon-e64-lr5s",
    R + "xeon-e64-lr5s",
    "XE",
    "64 envs x 8 mb + lr 5e-4 falling (preset 11-27 eve); s1,s4 rerun uncapped",
    [
        (0, 2.0, 0.8215, None),
        (1, 2.0, 1.1415, None),
        (2, 2.0, 0.796, None),
        (3, 2.0, 0.945, None),
        (4, 2.0, 1.1345, None),
        (5, 2.0, 0.755, None),
    ],
)
S(
    "L:xeon-eps01",
    L + '"2026-11-27 (night)"',
    "XE",
    "xeon-e64-lr5s + epsilon_final .01",
    [(1, 1.0, None, "+17.7"), (4, 1.0, None, "+8.0")],
)
S(
    "L:xeon-epsfall",
    L + '"2026-11-27 (night)"',
    "XE",
    "lr5s + eps .01 falling to .001 from smoothed 10",
    [
        (0, 1.0, None, "+5.1"),
        (1, 1.0, 0.99, None),
        (2, 1.0, 0.84, None),
        (3, 1.0, 0.90, None),
        (4, 1.0, None, "+8.0", "dup"),
    ],
)
S(
    "L:xeon-epshump",
    L + '"2026-11-27 (late night)"',
    "XE",
    "lr5s + eps .001 rising to .01 at 10, falling to .001 at 18",
    [
        (0, 1.0, 0.89, None, "pre"),
        (1, 1.0, 0.97, None, "pre"),
        (2, 1.0, 0.81, None, "pre"),
        (3, 1.0, 0.9986, None, "pre"),
        (4, 1.3, 1.18, None, "pre"),
    ],
)
S(
    "L:xeon-lam80",
    L + '"Q(lambda) with lambda 0.8"',
    "XE",
    "lr5s + pqn.q_lambda=0.8",
    [(4, 1.0, None, "+13.2"), (1, 1.0, None, "+17.3")],
)
S(
    "L:xeon-upd25",
    L + '"Updates falling from a smoothed 0"',
    "XE",
    "lr5s + updates falling from 0 to 1/4 at 18",
    [
        (0, 1.2, 0.82, None, "pre"),
        (1, 1.2, 0.87, None, "pre"),
        (2, 1.2, 0.79, None, "pre"),
        (3, 1.2, None, "+17.4", "pre"),
        (4, 1.2, 1.17, None, "pre"),
    ],
)
S(
    "xeon-upd12",
    R + "xeon-upd12",
    "XE",
    "today's preset (lr5s + updates falling from 12); s5 rerun to 2.0M",
    [
        (0, 2.0, 0.872, None, "pre"),
        (1, 2.0, 0.986, None, "pre"),
        (2, 2.0, 0.793, None, "pre"),
        (3, 2.0, 0.945, None, "pre"),
        (4, 2.0, 1.131, None, "pre"),
        (5, 2.0, None, "+17.5"),
    ],
)
S(
    "L:xeon-lr7",
    L + '"2026-11-28 (third session)"',
    "XE",
    "today's preset + lr 7e-4 (falling to 5e-5); s1,s2 stopped early",
    [(4, 1.2, 0.80, None), (5, 1.2, None, "+10.5"), (3, 1.2, None, "+17.7")],
)
S(
    "L:xeon-mb16",
    L + '"Half the gradient samples"',
    "XE",
    "today's preset + 2 ep x 16 mb of 128; s4 to 2.0M",
    [(5, 2.0, 0.92, None), (1, 2.0, 1.08, None), (4, 2.0, None, "+14.3")],
)
# ---- H100
S(
    "h100-preset",
    R + "h100-preset",
    "H100",
    "128 envs 4 ep preset (11-27) with --device cuda, 3 runs sharing one GPU",
    [(0, 3.0, 1.545, None), (1, 3.0, 1.101, None), (2, 3.0, 1.505, None)],
)
S(
    "L:h100-ten",
    L + '"2026-11-27: the take-off..."',
    "H100",
    "5 base + 5 lr_at_stop .1, 10 at once, decay over 1.2M, resumed ~0.8M",
    [
        (s, 1.1, None, b, "res noP")
        for s, b in [
            (0, "+8.4e"),
            (1, "+12.4e"),
            (2, "+5.2e"),
            (3, "+14.0e"),
            (4, "+12.0e"),
            (0, "+13.0e"),
            (1, "+12.2e"),
            (2, "-6.5e"),
            (3, "+16.6e"),
            (4, "+13.7e"),
        ]
    ],
)
