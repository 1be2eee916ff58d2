"""What --profile costs: the same short n-env training run with profiling off and on.

    uv run benchmarks/profile_overhead.py [--reps 3] [--frames 2400]

Each repetition trains pong-nenv's algorithm (book pipeline, sync backend, 3 envs) for
``--frames`` frames after a small warm-up, once with ``run.profile`` off and once on, in
alternating order; it reports the median FPS of each and their ratio. It also times a
disabled section alone, which bounds what profiling costs when it is off.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from atari_speed.core.config import load_preset
from atari_speed.core.timing import Profiler
from atari_speed.run.training import train


def disabled_section_ns(calls: int = 1_000_000) -> float:
    prof = Profiler(enabled=False)
    start = time.perf_counter()
    for _ in range(calls):
        with prof.section("x"):
            pass
    empty = time.perf_counter()
    for _ in range(calls):
        pass
    loop = time.perf_counter() - empty
    return (empty - start - loop) / calls * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--frames", type=int, default=2400, help="frames of each run")
    args = parser.parse_args()
    fps: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            for profile in (False, True) if rep % 2 == 0 else (True, False):
                preset = load_preset(
                    "pong-nenv",
                    [
                        f"run.frames={args.frames}",
                        "replay.initial=600",
                        "replay.size=5000",
                        f"run.profile={'true' if profile else 'false'}",
                    ],
                )
                summary = train(preset, Path(tmp) / f"{rep}-{profile}")
                fps[profile].append(summary["fps_after_warmup"])
    off, on = statistics.median(fps[False]), statistics.median(fps[True])
    ns = disabled_section_ns()
    print(f"\n| pong-nenv, {args.frames} frames, median of {args.reps} | FPS after warm-up |")
    print("|---|---:|")
    print(f"| profiling off | {off:.1f} |")
    print(f"| profiling on | {on:.1f} ({on / off - 1:+.1%}) |")
    # Sections per frame of the n-env loop: ~6 per vector step of 3 envs plus 3 per update.
    print(
        f"\na disabled section costs {ns:.0f} ns; at ~10 per frame that is "
        f"{10 * ns * 1e-9 * off:.4%} of a frame at {off:.0f} FPS"
    )


if __name__ == "__main__":
    main()
