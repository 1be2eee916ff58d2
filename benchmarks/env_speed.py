"""Env-only speed: agent steps per second with random actions, for every pipeline x image
backend x execution backend, against the book's ptan ``wrap_dqn`` measured in the same run.

    uv run benchmarks/env_speed.py                 # full grid, ~3 minutes on 2 cores
    uv run benchmarks/env_speed.py --quick         # fewer repetitions, shorter windows
    uv run benchmarks/env_speed.py --json out.json

Every configuration is built first; then the repetitions go round all of them in turn, so
slow drift of a noisy machine hits every row alike, and each row reports the median. A
second table gives each stage's share of the single-env step time (timing taps).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import numpy as np
from tqdm import tqdm

from atari_speed import make_env, make_vector_env, resolve_game, resolve_pipeline
from atari_speed.app.auto import cpu_info
from atari_speed.core.timing import StageTimer
from atari_speed.envs import wrappers
from atari_speed.envs.ale import ale_start_differs
from atari_speed.envs.imaging import IMAGE_BACKENDS

PIPELINES = ("book", "classic", "fast")


@dataclass
class Config:
    """One row: how to build it, and the steps/s of each repetition."""

    name: str
    pipeline: str
    image: str
    backend: str
    envs: int
    build: Callable[[], Any]
    env: Any = None
    step: Callable[[], int] | None = None
    rates: list[float] = field(default_factory=list)


def single_stepper(env: Any, seed: int) -> Callable[[], int]:
    """Step one gymnasium env with random actions; return agent steps taken (1)."""
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    n = env.action_space.n

    def step() -> int:
        _, _, terminated, truncated, _ = env.step(int(rng.integers(n)))
        if terminated or truncated:
            env.reset()
        return 1

    return step


def vector_stepper(env: Any, seed: int) -> Callable[[], int]:
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    n, k = env.single_action_space.n, env.num_envs

    def step() -> int:
        env.step(rng.integers(0, n, k))
        return k

    return step


def ptan_reference(game: str) -> Any:
    import ale_py
    import gymnasium as gym
    import ptan.common.wrappers
    from ale_py.registration import rom_id_to_name

    gym.register_envs(ale_py)
    return ptan.common.wrappers.wrap_dqn(gym.make(f"{rom_id_to_name(game)}NoFrameskip-v4"))


def configs(args: argparse.Namespace) -> list[Config]:
    game = args.game
    rows = [
        Config(
            "ptan wrap_dqn (reference)", "book", "opencv", "ptan", 1, lambda: ptan_reference(game)
        )
    ]
    for pipeline in args.pipelines:
        for image in args.images:
            spec = {"name": pipeline, **_with_image(pipeline, image)}
            rows.append(
                Config(
                    f"{pipeline}/{image}/single",
                    pipeline,
                    image,
                    "single",
                    1,
                    lambda s=spec: make_env(s, game),
                )
            )
            if _skips_unpooled(spec):  # the same env with every skipped frame rendered
                rows.append(
                    Config(
                        f"{pipeline}/{image}/single, every frame rendered",
                        pipeline,
                        image,
                        "single",
                        1,
                        lambda s=spec: _every_frame_rendered(s, game),
                    )
                )
            for backend in ("sync", "subprocess"):
                rows.append(
                    Config(
                        f"{pipeline}/{image}/{backend}",
                        pipeline,
                        image,
                        backend,
                        args.envs,
                        lambda s=spec, b=backend: make_vector_env(s, game, args.envs, backend=b),
                    )
                )
        refused = ale_start_differs(resolve_pipeline(pipeline))
        if refused:  # ALE would play other game starts than the pipeline names
            print(f"{pipeline}: no ale row: {refused}", file=sys.stderr)
            continue
        rows.append(
            Config(
                f"{pipeline}/ale-native/ale",
                pipeline,
                "ale-native",
                "ale",
                args.envs,
                lambda p=pipeline: make_vector_env(
                    p, game, args.envs, backend="ale", num_threads=args.ale_threads
                ),
            )
        )
    return rows


def _skips_unpooled(spec: dict[str, Any]) -> bool:
    return any(
        stage["wrapper"] == "MaxAndSkip" and not stage.get("max_pool", True)
        for stage in spec["stages"]
    )


def _every_frame_rendered(spec: dict[str, Any], game: str) -> Any:
    """The env as built before a skip without max-pool played its hidden frames unseen
    (``GameRecorder.step_frames``): each frame an emulator step with its screen."""
    with mock.patch.object(wrappers, "frame_stepper", lambda env: None):
        return make_env(spec, game)


def _with_image(pipeline: str, image: str) -> dict[str, Any]:

    resolved = resolve_pipeline(pipeline)
    resolved["image_backend"] = image
    for stage in resolved["stages"]:
        if stage["wrapper"] == "WarpFrame":
            stage["backend"] = image
    return resolved


def measure(rows: list[Config], seconds: float, reps: int) -> None:
    for i, row in enumerate(tqdm(rows, desc="building envs", leave=False)):
        row.env = row.build()
        single = row.backend in ("ptan", "single")
        row.step = (single_stepper if single else vector_stepper)(row.env, seed=i)
        for _ in range(20):  # warm-up: first resets, caches, worker start
            row.step()
    with tqdm(total=reps * len(rows), desc="measuring", leave=False) as bar:
        for _ in range(reps):
            for row in rows:
                steps, start = 0, time.perf_counter()
                while (elapsed := time.perf_counter() - start) < seconds:
                    steps += row.step()
                row.rates.append(steps / elapsed)
                bar.update()
    for row in rows:
        row.env.close()


def stage_shares(args: argparse.Namespace, steps: int) -> list[dict[str, Any]]:
    out = []
    for pipeline in args.pipelines:
        for image in args.images:
            timer = StageTimer()
            env = make_env(_with_image(pipeline, image), args.game, seed=0, tap=timer.tap)
            step = single_stepper(env, seed=0)
            for _ in range(50):
                step()
            timer.reset()
            for _ in range(steps):
                step()
            own = timer.exclusive()
            total = sum(own.values())
            out.append(
                {
                    "pipeline": pipeline,
                    "image": image,
                    "us_per_step": 1e6 * total / steps,
                    "shares": {k: v / total for k, v in own.items()},
                }
            )
            env.close()
    return out


def machine() -> str:
    import torch  # only for the thread count users will see in training

    cpu = cpu_info()[0] or platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--game", default="pong", help="ALE game name (default: pong)")
    parser.add_argument(
        "--envs",
        type=int,
        default=16,
        help="envs per vector backend (default: 16; ale native peaks there on 2 cores)",
    )
    parser.add_argument(
        "--ale-threads",
        type=int,
        default=os.cpu_count() or 1,
        help="threads of ale-py's native vector env (default: all cores)",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=1.5,
        help="length of one timing window per row (default: 1.5)",
    )
    parser.add_argument(
        "--reps",
        type=int,
        default=5,
        help="repetitions per row; the median is reported (default: 5)",
    )
    parser.add_argument("--pipelines", nargs="+", default=list(PIPELINES))
    parser.add_argument(
        "--images", nargs="+", default=list(IMAGE_BACKENDS), choices=list(IMAGE_BACKENDS)
    )
    parser.add_argument("--quick", action="store_true", help="3 reps of 0.7 s")
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.reps = 0.7, 3
    resolve_game(args.game)

    rows = configs(args)
    measure(rows, args.seconds, args.reps)
    reference = statistics.median(rows[0].rates)
    print(f"\nEnv-only agent steps/s, {args.game}, random actions; {machine()}")
    print(
        f"median of {args.reps} x {args.seconds:g} s windows; vector backends: {args.envs} "
        f"envs (subprocess: {min(args.envs, os.cpu_count() or 1)} workers, ale: "
        f"{args.ale_threads} threads)\n"
    )
    print("| configuration (pipeline/image/backend) | envs | steps/s | vs ptan |")
    print("|---|---:|---:|---:|")
    results = []
    for row in rows:
        rate = statistics.median(row.rates)
        results.append(
            {
                "name": row.name,
                "pipeline": row.pipeline,
                "image": row.image,
                "backend": row.backend,
                "envs": row.envs,
                "steps_per_s": rate,
                "ratio": rate / reference,
                "reps": row.rates,
            }
        )
        print(f"| {row.name} | {row.envs} | {rate:,.0f} | {rate / reference:.2f}x |")
    book = [r for r in results if r["pipeline"] == "book" and r["backend"] != "ptan"]
    if book:
        best = max(book, key=lambda r: r["steps_per_s"])
        print(
            f"\nbest `book` configuration: {best['name']} at {best['ratio']:.2f}x the book's "
            "single-env steps/s"
        )

    shares = stage_shares(args, steps=1500)
    stages = list(shares[0]["shares"])
    for s in shares[1:]:
        stages += [k for k in s["shares"] if k not in stages]
    print("\nShare of single-env step time per stage (timing taps; rows add up to 100%)\n")
    print("| pipeline/image | us/step | " + " | ".join(stages) + " |")
    print("|---|---:|" + "---:|" * len(stages))
    for s in shares:
        cells = [f"{100 * s['shares'][k]:.1f}%" if k in s["shares"] else "-" for k in stages]
        print(
            f"| {s['pipeline']}/{s['image']} | {s['us_per_step']:.0f} | " + " | ".join(cells) + " |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"machine": machine(), "args": vars(args), "rows": results, "stage_shares": shares},
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()
