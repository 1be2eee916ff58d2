"""A greedy agent's game from every start its pipeline can give: one game for each number
of no-op frames NoopReset may play, all side by side, each weighted by how often the
pipeline draws it.

Without sticky actions an Atari game is a function of its start and the agent's actions,
so a greedy agent (epsilon 0) plays one game per start, always the same: these games are
all it can play, and their weighted mean is its expected greedy score, exactly, where an
evaluation of 10 games draws a few of them (Pong's ale-style start: 29 games, from 0 to
28 NOOP frames after one FIRE frame). It also names the starts the agent loses: an agent
that wins most starts 21-0 and walks into a losing loop from a few (a "trap") shows here
as what it is, not as an evaluation's unlucky draw. With sticky actions a start's game is
one draw among many, and the mean is an estimate (it says so).

Games that reach the same state are played once (``evaluation.play_merging``, what
``eval.every_start`` plays); ``--played-out`` also plays every start out, side by side,
and says whether the scores agree and what each way cost.

    uv run benchmarks/starts.py runs/x/s0/checkpoint.pt runs/x/s0/best.pt
    uv run benchmarks/starts.py runs/x/s*/checkpoint.pt --per-start
    uv run benchmarks/starts.py runs/x/s0/best.pt --played-out
    uv run benchmarks/starts.py --between a.pt b.pt --points 5

``--between`` plays weights on the straight line from one checkpoint's to another's
(``(1 - t) a + t b`` for ``--points`` values of t from 0 to 1): whether two policies that
each play well still play well mixed, which is what a moving average of the weights takes
for granted.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from atari_speed.core.errors import ConfigError
from atari_speed.run.checkpoint import load_checkpoint
from atari_speed.run.evaluation import (
    play_every_start,
)


def summary_line(name: str, result: dict[str, Any]) -> str:
    """One line: the weighted mean, the starts lost and the lowest score."""
    scores, noops = np.array(result["scores"]), result["noops"]
    lost = [n for n, s in zip(noops, scores, strict=True) if s < 0]
    kind = "exact" if result["exact"] else "one draw a start (sticky actions): an estimate"
    lost_text = (
        f"lost from {len(lost)} ({', '.join(map(str, lost))} NOOPs)" if lost else "none lost"
    )
    return (
        f"{name}: mean {result['mean']:+.2f} over {len(scores)} starts ({kind}); "
        f"{lost_text}; lowest {scores.min():+.0f}; {len(set(scores.tolist()))} distinct scores"
    )


def mixed(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], t: float) -> dict:
    """The weights ``(1 - t) a + t b``; ValueError unless both have the same tensors."""
    if a.keys() != b.keys() or any(a[k].shape != b[k].shape for k in a):
        raise ValueError("the two checkpoints' networks differ")
    return {k: torch.lerp(a[k].float(), b[k].float(), t).to(a[k].dtype) for k in a}


def distance(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """||b - a|| / ||a|| over all the weights."""
    flat_a = torch.cat([v.float().flatten() for v in a.values()])
    flat_b = torch.cat([b[k].float().flatten() for k in a])
    return float((flat_b - flat_a).norm() / flat_a.norm())


def play_between(paths: list[str], points: int, max_frames: int) -> None:
    """Every start's greedy score of ``points`` mixes of two checkpoints' weights."""
    try:
        a, b = (load_checkpoint(p) for p in paths)
        net = a.policy(torch.device("cpu"))
        if (a.game, a.network, a.obs_shape) != (b.game, b.network, b.obs_shape):
            raise ConfigError("the two checkpoints are not of one game and network")
        print(
            f"{paths[0]} (agent step {a.frames:,}) to {paths[1]} (agent step {b.frames:,}): "
            f"||b - a|| / ||a|| = {distance(a.net, b.net):.3f}"
        )
        for t in np.linspace(0.0, 1.0, points):
            started = time.perf_counter()
            net.load_state_dict(mixed(a.net, b.net, float(t)))
            result = play_every_start(a.pipeline, a.game, net, max_frames)
            line = summary_line(f"t = {t:.2f}", result)
            print(f"{line}; {time.perf_counter() - started:.0f} s", flush=True)
    except (ConfigError, ValueError) as err:
        raise SystemExit(f"starts.py --between: {err}") from None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkpoints", nargs="*", help="best.pt or checkpoint.pt files")
    parser.add_argument(
        "--between",
        nargs=2,
        metavar=("A", "B"),
        help="play mixes of two checkpoints' weights instead (see above)",
    )
    parser.add_argument(
        "--points", type=int, default=5, help="--between: how many mixes, ends included"
    )
    parser.add_argument(
        "--max-frames",
        type=int,
        default=40_000,
        help="a game's most emulator frames, scored as it stands then (eval.max_frames's "
        "default in pong-fast: a greedy Pong agent can rally forever)",
    )
    parser.add_argument("--per-start", action="store_true", help="also each start's score")
    parser.add_argument(
        "--played-out",
        action="store_true",
        help="also play every start out (no merging): the scores must agree; both ways' "
        "agent steps and seconds",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)  # the games' steps are most of the time; one core each
    if args.between:
        play_between(args.between, max(args.points, 2), args.max_frames)
        return
    if not args.checkpoints:
        parser.error("name a checkpoint, or two with --between")
    for path in args.checkpoints:
        started = time.perf_counter()
        try:
            ckpt = load_checkpoint(path)
            net = ckpt.policy(torch.device("cpu"))
            result = play_every_start(ckpt.pipeline, ckpt.game, net, args.max_frames)
        except ConfigError as err:
            raise SystemExit(f"starts.py: {path}: {err}") from None
        seconds = time.perf_counter() - started
        name = f"{Path(path)} (agent step {ckpt.frames:,})"
        played = f"{result['played']:,} agent steps played"
        print(f"{summary_line(name, result)}; {played}, {seconds:.0f} s")
        if args.played_out:
            started = time.perf_counter()
            whole = play_every_start(ckpt.pipeline, ckpt.game, net, args.max_frames, merge=False)
            agree = "the same scores" if whole["scores"] == result["scores"] else "OTHER SCORES"
            print(
                f"  played out: {agree}; {whole['played']:,} agent steps, "
                f"{time.perf_counter() - started:.0f} s"
            )
        if args.per_start:
            pairs = zip(result["noops"], result["scores"], strict=True)
            print("  " + ", ".join(f"{n}: {s:+.0f}" for n, s in pairs))


if __name__ == "__main__":
    main()
