"""How long saving and restoring DQN's replay takes (replay.npz, what ``--resume`` reads),
and how big the file is, for replays of Pong frames.

    uv run benchmarks/replay_save.py                       # 100k and 1M transitions
    uv run benchmarks/replay_save.py --sizes 100000 --reps 3

The replay is filled with real frames of the maxpool84 pipeline (84x84, 4-frame stacks,
as the book's; ALE's game start, which the ale backend plays), 8 envs stepped with random
actions on the ale backend (a trained agent's frames compress
about alike: the background is the same). A 1M replay takes 7 GB of memory. Each size
reports the median of ``--reps`` saves and loads into a fresh buffer, with the file's
size and its ratio to the raw arrays.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from atari_speed.agent.replay import FrameReplay
from atari_speed.core.shm import layout_nbytes
from atari_speed.envs.vector import make_vector_env
from atari_speed.run.replay_file import load_replay, save_replay

ENVS = 8


def filled(size: int) -> FrameReplay:
    """A replay of ``size`` transitions of Pong, played at random."""
    venv = make_vector_env("maxpool84", "pong", ENVS, backend="ale", seed=0)
    shape = venv.single_observation_space.shape
    replay = FrameReplay(size, ENVS, (1, *shape[1:]), shape[0])
    rng = np.random.default_rng(0)
    obs, _ = venv.reset(seed=0)
    steps = range(size // ENVS)
    for _ in tqdm(steps, desc=f"filling {size:,}", unit="step", leave=False, mininterval=5):
        actions = rng.integers(0, venv.single_action_space.n, ENVS)
        replay.put_obs(obs)
        obs, rewards, terminated, truncated, infos = venv.step(actions)
        final = infos.get("final_obs") if truncated.any() else None
        replay.commit(actions, rewards, terminated, truncated=truncated, final_obs=final)
    venv.close()
    return replay


def measure(size: int, reps: int, where: Path) -> dict:
    replay = filled(size)
    path = where / "replay.npz"
    saves, loads = [], []
    for _ in range(reps):
        start = time.perf_counter()
        nbytes = save_replay(replay, path, frames=size)
        saves.append(time.perf_counter() - start)
        fresh = FrameReplay(size, ENVS, replay.frame_shape, replay.k)
        start = time.perf_counter()
        load_replay(path, fresh)
        loads.append(time.perf_counter() - start)
        assert np.array_equal(fresh.frames, replay.frames), "read back as written"
        del fresh
    raw = layout_nbytes(FrameReplay.layout(size, ENVS, replay.frame_shape, replay.k, 1))
    return {
        "transitions": size,
        "raw_mb": round(raw / 1e6, 1),
        "file_mb": round(nbytes / 1e6, 1),
        "ratio": round(raw / nbytes, 1),
        "save_s": round(statistics.median(saves), 2),
        "load_s": round(statistics.median(loads), 2),
    }


def cpu_model() -> str:
    for line in (
        Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    ):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="where the file goes (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as where:
        rows = [measure(size, args.reps, Path(where)) for size in args.sizes]
    print(f"CPU: {cpu_model()}; median of {args.reps}")
    print("| transitions | raw arrays | replay.npz | ratio | save | load |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['transitions']:,} | {r['raw_mb']:,} MB | {r['file_mb']:,} MB | "
            f"{r['ratio']}x | {r['save_s']} s | {r['load_s']} s |"
        )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
