"""Training speed of the three modes with the same algorithm (pong-baseline's
hyperparameters: batch 32, one SGD update per frame, ...), each a fresh ``train.py`` run
for a fixed wall-clock time; FPS is measured after the replay warm-up.

    uv run benchmarks/train_speed.py                  # ~10 minutes
    uv run benchmarks/train_speed.py --seconds 60 --reps 1
    uv run benchmarks/train_speed.py --trees ../before . --rows ...   # before/after a change
    uv run benchmarks/train_speed.py --rows "PQN n-env, 16 envs x 64 steps" \
        "PQN parallel, 1 actor x 16 envs, learner 1 thread" --reps 3   # PQN's two modes
    uv run --extra ray benchmarks/train_speed.py --ray-address 127.0.0.1:6379 --rows \
        "parallel on a Ray cluster, 2 actors x 4 envs, 1 update per 16 frames" ...  # a cluster

``--trees`` runs every row on each checkout given (another worktree of this repo, say the
commit before a change), alternating between them within each repetition, so a change is
compared with what it changed in one run on one machine.
On a machine busy with other work, ``--cpu-frames N`` makes every run train N frames
and compares the CPU seconds each spent per 1,000 frames, which the other work changes
far less than wall time (a short run there may not even finish starting in its seconds):

    OMP_NUM_THREADS=1 uv run benchmarks/train_speed.py --trees ../before . --cpu-frames 8192 \
        --rows "PQN n-env, 16 envs x 64 steps" --set run.precision="'fp32'" --reps 3

(the PQN rows run bf16, which a CPU without bf16 units emulates several times slower).

Rows run one after another, repeated ``--reps`` times in turn (so drift of a noisy
machine spreads over all rows), and each row reports the median. Every row uses the same
``replay.initial`` (``--warmup``) so warm-up ends early and alike.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
from math import isnan, nan
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent

CL = ["--set", "run.channels_last=true"]
ROWS: dict[str, list[str]] = {
    "baseline (ptan, 1 env)": [],
    "n-env, 4 envs": ["--mode", "n-env", "--envs", "4"],
    "parallel, 1 actor x 4 envs": ["--mode", "parallel", "--envs", "4"],
    "baseline, channels-last learner": CL,
    "n-env, 4 envs, channels-last learner": ["--mode", "n-env", "--envs", "4", *CL],
    "parallel, 1 actor x 4 envs, channels-last learner": ["--mode", "parallel", "--envs", "4", *CL],
    # ale cannot play the book's game start (classic no-ops, FireReset): this row plays
    # maxpool84, the book's 84x84 max-pooled frames from ALE's start
    "n-env, 8 envs, ale backend (maxpool84), channels-last learner": [
        "--mode",
        "n-env",
        "--envs",
        "8",
        "--set",
        "env.backend='ale'",
        "--set",
        "env.pipeline='maxpool84'",
        *CL,
    ],
}
# PQN (pong-pqn in bf16: the pong-fast recipe with nothing left to auto), n-env against
# parallel mode, where one actor process fills the next rollout while the learner trains.
# A row's --preset comes after run_row's, so it wins.
# The rows measured before pong-fast took 64 envs and 2 epochs spell out the 4 epochs x 4
# minibatches they ran with, so their figures in the docs stay reproducible.
PQN = [
    "--preset", "pong-pqn", "--set", "run.precision='bf16'",
    "--set", "pqn.epochs=4", "--set", "pqn.minibatches=4",
]  # fmt: skip
PARALLEL = ["--mode", "parallel", "--set", "run.actors=1"]
W32 = ["--set", "run.envs=32", "--set", "pqn.rollout=32"]
W16 = ["--set", "run.envs=16", "--set", "pqn.rollout=64"]
W64 = ["--set", "run.envs=64", "--set", "pqn.rollout=32"]
MB8 = ["--set", "pqn.minibatches=8"]
E2 = ["--set", "pqn.epochs=2"]  # after PQN's epochs=4, so it wins
PONG_FAST = [
    "--preset", "pong-fast", "--mode", "n-env", "--set", "run.precision='fp32'",
    "--set", "env.backend='ale'",
]  # fmt: skip
W128 = ["--set", "run.envs=128", "--set", "pqn.minibatches=16"]
E4 = ["--set", "pqn.epochs=4"]
CL = ["--set", "run.channels_last=true"]
NCL = ["--set", "run.channels_last=false"]
PQN_ROWS: dict[str, list[str]] = {
    "PQN n-env, 16 envs x 64 steps": [*PQN, *W16],
    "PQN parallel, 1 actor x 16 envs, learner 1 thread": [
        *PQN,
        *W16,
        *PARALLEL,
        "--set",
        "run.learner_threads=1",
    ],
    "PQN parallel, 1 actor x 16 envs, learner 2 threads": [
        *PQN,
        *W16,
        *PARALLEL,
        "--set",
        "run.learner_threads=2",
    ],
    "PQN n-env, 32 envs x 32 steps": [*PQN, *W32],
    "PQN parallel, 1 actor x 32 envs x 32 steps, learner 1 thread": [
        *PQN,
        *W32,
        *PARALLEL,
        "--set",
        "run.learner_threads=1",
    ],
    "PQN parallel, 1 actor x 32 envs x 32 steps, learner 2 threads": [
        *PQN,
        *W32,
        *PARALLEL,
        "--set",
        "run.learner_threads=2",
    ],
    # more envs per rollout and fewer epochs: the same 16 updates of 256 per rollout train
    # on twice the transitions, so 2 gradient samples per transition against 4
    "PQN n-env, 32 envs x 32 steps, 2 epochs x 4 minibatches": [*PQN, *W32, *E2],
    "PQN n-env, 64 envs x 32 steps, 4 epochs x 8 minibatches": [*PQN, *W64, *MB8],
    "PQN n-env, 64 envs x 32 steps, 2 epochs x 8 minibatches": [*PQN, *W64, *MB8, *E2],
    # pong-fast's recipe: the envs are now over half of a frame, so overlap may pay more
    "PQN parallel, 1 actor x 64 envs x 32 steps, 2 epochs x 8 minibatches, learner 1 thread": [
        *PQN,
        *W64,
        *MB8,
        *E2,
        *PARALLEL,
        "--set",
        "run.learner_threads=1",
    ],
    "PQN parallel, 1 actor x 64 envs x 32 steps, 2 epochs x 8 minibatches, learner 2 threads": [
        *PQN,
        *W64,
        *MB8,
        *E2,
        *PARALLEL,
        "--set",
        "run.learner_threads=2",
    ],
    # pong-fast, fp32 and the ale backend pinned (a CPU without bf16 units, where auto
    # runs fp32). Each row sets what its name says, so it measures the same recipe
    # whatever the preset becomes: the preset's 128 envs x 4 epochs x 16 minibatches,
    # 64 envs with the same minibatch of 256, and the 2-epoch recipes it replaced.
    "pong-fast fp32, 128 envs, 4 epochs x 16 minibatches, channels-last": [
        *PONG_FAST,
        *W128,
        *E4,
        *CL,
    ],
    "pong-fast fp32, 64 envs, 4 epochs x 8 minibatches, channels-last": [
        *PONG_FAST,
        *W64,
        *MB8,
        *E4,
        *CL,
    ],
    "pong-fast fp32, 64 envs, 2 epochs x 8 minibatches": [*PONG_FAST, *W64, *MB8, *E2, *NCL],
    "pong-fast fp32, 128 envs, 2 epochs x 16 minibatches": [*PONG_FAST, *W128, *E2, *NCL],
    "pong-fast fp32, 128 envs, 2 epochs x 16 minibatches, channels-last": [
        *PONG_FAST,
        *W128,
        *E2,
        *CL,
    ],
}
# Parallel mode's actors as local processes against Ray actors (needs `uv run --extra ray`),
# at the book's one update per frame (learner-bound) and at one per 16 frames, where the
# actors' throughput, and so Ray's overhead, shows (docs/scale.md).
TWO = ["--mode", "parallel", "--envs", "4", "--set", "run.actors=2"]
RAY = ["--engine", "ray"]
SPARSE = ["--set", "dqn.train_every=16"]
CLUSTER = ["--engine", "ray", "--ray-address", "{cluster}"]  # {cluster}: --ray-address's
PQN_TWO = ["--mode", "parallel", "--envs", "16", "--set", "run.actors=2", "--set", "pqn.rollout=32"]
RAY_ROWS: dict[str, list[str]] = {
    "parallel, 2 actors x 4 envs": TWO,
    "parallel on Ray, 2 actors x 4 envs": [*TWO, *RAY],
    "parallel, 2 actors x 4 envs, 1 update per 16 frames": [*TWO, *SPARSE],
    "parallel on Ray, 2 actors x 4 envs, 1 update per 16 frames": [*TWO, *RAY, *SPARSE],
    # PQN: 2 actors fill 16 envs' columns each of a 32-step rollout (pong-fast's 32 x 32)
    "PQN parallel, 2 actors x 16 envs x 32 steps": [*PQN, *PQN_TWO],
    "PQN parallel on Ray, 2 actors x 16 envs x 32 steps": [*PQN, *PQN_TWO, *RAY],
    # The same on a running cluster (docs/scale.md, "On a cluster"), named by --ray-address.
    "parallel on a Ray cluster, 2 actors x 4 envs, 1 update per 16 frames": [
        *TWO,
        *CLUSTER,
        *SPARSE,
    ],
    "PQN parallel on a Ray cluster, 2 actors x 16 envs x 32 steps": [*PQN, *PQN_TWO, *CLUSTER],
}
ALL_ROWS = {**ROWS, **PQN_ROWS, **RAY_ROWS}


def run_row(
    args: list[str],
    seconds: float,
    warmup: int | None,
    extra: list[str],
    tree: Path = ROOT,
    frames: int | None = None,
    preset: str = "pong-baseline",
) -> dict:
    """One ``train.py`` run of a row: for ``seconds`` of wall time, or, given ``frames``,
    for exactly that many frames, with the CPU seconds it and its processes spent
    (``cpu_seconds`` in the summary it returns). ``warmup`` sets ``replay.initial`` (None:
    the preset's, as for PQN, which has no replay)."""
    if frames:
        budget = ["--frames", str(frames)]
    else:
        budget = ["--frames", "100000000", "--set", f"run.seconds={seconds}"]
    replay = [] if warmup is None else ["--set", f"replay.initial={warmup}"]
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            str(tree / "train.py"),
            "--preset",
            preset,
            "--run-dir",
            tmp,
            *budget,
            *replay,
            *args,
            *extra,
        ]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=tree)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if out.returncode != 0:  # report it and keep the other rows' numbers
            print(f"\n{' '.join(cmd)} failed:\n{out.stderr[-2000:]}", file=sys.stderr)
            return {
                "fps_after_warmup": float("nan"),
                "torch_threads": None,
                "device": None,
                "precision": "-",
                "update_to_data": {"train_every": float("nan")},
                "cpu_seconds": nan,
            }
        # cpu_seconds here: train.py's and its child processes' (the summary's own counts
        # train.py's process only, without the subprocess backend's workers)
        return {**json.loads((Path(tmp) / "summary.json").read_text()), "cpu_seconds": cpu}


def learner_ceiling(seconds: float, channels_last: bool) -> float:
    """SGD updates per second of the learner alone, on a replay filled with random frames:
    at one update per frame, no mode can train faster than this."""
    import time

    import numpy as np
    import torch

    from atari_speed.agent.learner import Learner
    from atari_speed.agent.networks import DQN
    from atari_speed.agent.replay import FrameReplay
    from atari_speed.core.config import load_preset

    preset = load_preset("pong-baseline")
    rng = np.random.default_rng(0)
    replay = FrameReplay(20_000, 1, (1, 84, 84), 4, preset.dqn.n_steps, preset.dqn.gamma)
    for _ in range(5_000):
        replay.put_obs(rng.integers(0, 255, (1, 4, 84, 84), dtype=np.uint8))
        replay.commit(rng.integers(0, 6, 1), rng.random(1), rng.random(1) < 0.01)
    learner = Learner(DQN((4, 84, 84), 6), preset.dqn, torch.device("cpu"), channels_last)
    batch = None
    for _ in range(10):
        batch = replay.sample(preset.dqn.batch_size, rng, batch)
        learner.step(batch)
    updates, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        batch = replay.sample(preset.dqn.batch_size, rng, batch)
        learner.step(batch)
        updates += 1
    learner.pop_loss()
    return updates / (time.perf_counter() - start)


def fps_of(summary: dict) -> float:
    """FPS after the warm-up, NaN for a run that made no update in its time (a loaded
    machine can spend a short run's seconds starting up)."""
    fps = summary["fps_after_warmup"]
    return nan if fps is None else float(fps)


def median_or_nan(values: list[float]) -> float:
    """The median of the runs that measured something; NaN if none did."""
    kept = [v for v in values if not isnan(v)]
    return statistics.median(kept) if kept else nan


def compare_trees(args: argparse.Namespace, extra: list[str]) -> None:
    """Every row on every tree, alternating within each repetition; the medians and each
    tree's ratio to the first. With ``--cpu-frames`` every run trains that many frames and
    the figure is CPU seconds per 1,000 frames (lower is faster), which a machine busy
    with other work changes far less than it changes wall time."""
    trees = [t.resolve() for t in args.trees]
    per_k = args.cpu_frames
    runs: dict[tuple[str, Path], list[float]] = {(r, t): [] for r in args.rows for t in trees}
    with tqdm(total=args.reps * len(args.rows) * len(trees), desc="runs") as bar:
        for _ in range(args.reps):
            for name in args.rows:
                for tree in trees:
                    s = run_row(ALL_ROWS[name], args.seconds, args.warmup, extra, tree, per_k)
                    if per_k:
                        runs[name, tree].append(1000 * s["cpu_seconds"] / per_k)
                    else:
                        runs[name, tree].append(fps_of(s))
                    bar.update()
    if args.json:  # the raw runs first: the table below cannot lose them
        raw = {f"{name} @ {tree}": v for (name, tree), v in runs.items()}
        Path(args.json).write_text(json.dumps({"args": str(vars(args)), "runs": raw}, indent=2))
    what = (
        f"CPU seconds per 1,000 frames, {per_k:,} frames per run (lower is faster)"
        if per_k
        else f"Training FPS after warm-up, {args.seconds:g} s per run"
    )
    print(f"\n{what}, median of {args.reps} (runs alternate between the trees)\n")
    print("| row | " + " | ".join(str(t) for t in trees) + " | ratio to the first | runs |")
    print("|---|" + "---:|" * (len(trees) + 1) + "---|")
    for name in args.rows:
        medians = [median_or_nan(runs[name, t]) for t in trees]
        ratios = ", ".join(f"{m / medians[0]:.2f}x" if medians[0] else "-" for m in medians[1:])
        each = "; ".join(", ".join(f"{v:.2f}" for v in runs[name, t]) for t in trees)
        print(f"| {name} | " + " | ".join(f"{m:.2f}" for m in medians) + f" | {ratios} | {each} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=100, help="wall time per run")
    parser.add_argument("--reps", type=int, default=1, help="repetitions of every row")
    parser.add_argument(
        "--warmup", type=int, default=2000, help="replay.initial for every row (default 2000)"
    )
    parser.add_argument(
        "--rows",
        nargs="+",
        choices=list(ALL_ROWS),
        default=list(ROWS),
        help="rows to run (default: the DQN rows; the PQN rows compare n-env and parallel)",
    )
    parser.add_argument(
        "--set",
        dest="extra",
        action="append",
        default=[],
        help="extra --set for every row, e.g. dqn.batch_size=64",
    )
    parser.add_argument(
        "--cpu-frames",
        type=int,
        metavar="N",
        help="with --trees: train N frames per run and compare CPU seconds per 1,000 frames "
        "instead of FPS (for a machine busy with other work)",
    )
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument(
        "--ray-address",
        metavar="HOST:PORT",
        help="the running Ray cluster the 'on a Ray cluster' rows join (docs/scale.md)",
    )
    parser.add_argument(
        "--trees",
        nargs="+",
        type=Path,
        help="run every row on each of these checkouts in turn and compare them",
    )
    args = parser.parse_args()
    if args.cpu_frames and not args.trees:
        parser.error("--cpu-frames compares trees: give --trees too")
    extra = [x for item in args.extra for x in ("--set", item)]
    on_cluster = [name for name in args.rows if "{cluster}" in ALL_ROWS[name]]
    if on_cluster and not args.ray_address:
        parser.error(
            f"{on_cluster[0]!r} joins a running Ray cluster: start one (docs/scale.md) and "
            "give its address with --ray-address HOST:PORT"
        )
    for name in on_cluster:
        ALL_ROWS[name] = [args.ray_address if a == "{cluster}" else a for a in ALL_ROWS[name]]
    if args.trees:
        compare_trees(args, extra)
        return
    results: dict[str, list[dict]] = {name: [] for name in args.rows}
    with tqdm(total=args.reps * len(args.rows), desc="runs") as bar:
        for _ in range(args.reps):
            for name in args.rows:
                results[name].append(run_row(ALL_ROWS[name], args.seconds, args.warmup, extra))
                bar.update()
    first = args.rows[0]
    base = median_or_nan([fps_of(s) for s in results[first]])
    print(
        f"\nTraining FPS after warm-up, {args.seconds:g} s per run, median of {args.reps}; "
        f"torch threads {results[first][0]['torch_threads']}, device "
        f"{results[first][0]['device']}\n"
    )
    print("| row | FPS after warm-up | vs the first row | gradient samples per frame | runs |")
    print("|---|---:|---:|---:|---|")
    rows = []
    for name in args.rows:
        runs = [fps_of(s) for s in results[name]]
        fps = median_or_nan(runs)
        samples = results[name][0]["update_to_data"].get("samples_per_frame", float("nan"))
        rows.append({"mode": name, "fps_after_warmup": fps, "ratio": fps / base, "runs": runs})
        print(
            f"| {name} | {fps:.1f} | {fps / base:.2f}x | {samples:g} | "
            + ", ".join(f"{r:.1f}" for r in runs)
            + " |"
        )
    if not set(args.rows) & set(ROWS):  # the ceilings are of the DQN rows' learner
        _write(args, rows)
        return
    for cl in (False, True):
        name = "ceiling: learner alone, no env" + (", channels-last" if cl else "")
        fps = learner_ceiling(args.seconds / 2, cl)
        rows.append({"mode": name, "fps_after_warmup": fps, "ratio": fps / base})
        print(f"| {name} | {fps:.1f} | {fps / base:.2f}x | 32 | |")
    _write(args, rows)


def _write(args: argparse.Namespace, rows: list[dict]) -> None:
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
