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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkpoints", nargs="+", help="best.pt or checkpoint.pt files")
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
