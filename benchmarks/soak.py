"""Soak test (not a unit test): long runs in each mode, with what a leak would grow
sampled every ``--every`` seconds: resident memory of train.py and its children, their
open file descriptors and threads, and shared-memory blocks under /dev/shm.

    uv run benchmarks/soak.py                      # 60 minutes a row (3 hours)
    uv run benchmarks/soak.py --minutes 60 --together --out docs/soak   # docs/reliability.md

Rows: pong-fast (PQN) in n-env and in parallel mode, and DQN in parallel mode with a
5k replay, so that its replay is full (and its memory should be flat) after three
minutes (a replay's pages count as resident as they are first written). Each run has no
solve criterion (``run.stop_reward = 99``) so it runs its whole time. Writes
``soak.json``, ``soak.md`` (first sample after warm-up against the last) and ``soak.png``
(memory against time) into ``--out``; rows measured before and not rerun (``--rows``)
stay in them. ``--together`` runs the rows at the same time (an hour each in one hour of
wall time): they share the cores, so each steps fewer frames, which a leak test can
afford; the frames each reached are in the table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROWS: dict[str, list[str]] = {
    "pong-fast, n-env": ["--preset", "pong-fast", "--mode", "n-env"],
    "pong-fast, parallel": [
        "--preset", "pong-fast", "--mode", "parallel",
        # its actors see neither the score nor the average these follow
        "--set", "explore.epsilon_at_stop=-1", "--set", "pqn.act_with_average=false",
    ],
    "DQN parallel, 5k replay": [
        "--preset", "pong-parallel", "--set", "replay.initial=1000", "--set", "replay.size=5000",
    ],
}  # fmt: skip


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def sample(pid: int) -> dict[str, float]:
    """Resident MB, open fds and threads summed over the process tree, and the shared-memory
    blocks it has mapped."""
    rss = fds = threads = 0
    blocks: set[str] = set()  # this run's shared-memory blocks, whoever else makes some
    for p in tree(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text().splitlines()
            fds += len(os.listdir(f"/proc/{p}/fd"))
            maps = Path(f"/proc/{p}/maps").read_text()
        except OSError:
            continue
        blocks.update(word for word in maps.split() if word.startswith("/dev/shm/psm_"))
        for line in status:
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1])
            elif line.startswith("Threads:"):
                threads += int(line.split()[1])
    return {"rss_mb": round(rss / 1024, 1), "fds": fds, "threads": threads, "shm": len(blocks)}


def run_dir_of(name: str, where: Path) -> Path:
    return where / name.replace(" ", "_").replace(",", "")


def start(name: str, args: list[str], minutes: float, where: Path) -> subprocess.Popen:
    run_dir = run_dir_of(name, where)
    command = [sys.executable, str(ROOT / "train.py"), *args, "--run-dir", str(run_dir)]
    command += ["--set", f"run.seconds={minutes * 60}", "--set", "run.stop_reward=99"]
    command += ["--frames", "100000000"]
    # stderr to a file, not a pipe: an hour of warnings could fill a pipe and block the run
    err = (where / f"{run_dir.name}.err").open("w")
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, text=True)


def soak(runs: dict[str, subprocess.Popen], every: float, where: Path) -> dict[str, list[dict]]:
    """Samples every run until all have ended; the frames each reached go in its last sample."""
    samples: dict[str, list[dict]] = {name: [] for name in runs}
    begin = time.monotonic()
    while any(proc.poll() is None for proc in runs.values()):
        time.sleep(every)
        for name, proc in runs.items():
            if proc.poll() is None:
                minutes = round((time.monotonic() - begin) / 60, 2)
                samples[name].append({"minutes": minutes, **sample(proc.pid)})
                print(name, samples[name][-1], flush=True)
    for name, proc in runs.items():
        run_dir = run_dir_of(name, where)
        if proc.returncode != 0:
            err = (where / f"{run_dir.name}.err").read_text()
            raise SystemExit(f"{name}: train.py exited {proc.returncode}: {err[-2000:]}")
        summary = json.loads((run_dir / "summary.json").read_text())
        # agent steps: summary.json's "steps", "frames" in earlier versions
        samples[name][-1]["frames"] = summary.get("steps", summary.get("frames"))
        samples[name][-1]["together"] = len(runs) > 1
    return samples


def frames(last: dict) -> str:
    if last.get("frames") is None:
        return "?"
    return f"{last['frames']:,}" + (" (rows together)" if last.get("together") else "")


def report(results: dict[str, list[dict]], out: Path) -> None:
    lines = [
        "| run | minutes | frames | resident MB (after warm-up -> end) | fds | threads "
        "| shm blocks |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, samples in results.items():
        first = samples[min(2, len(samples) - 1)]  # after 2 samples: warm-up done
        last = samples[-1]
        lines.append(
            f"| {name} | {last['minutes']:.0f} | {frames(last)} "
            f"| {first['rss_mb']:,.0f} -> {last['rss_mb']:,.0f} "
            f"| {first['fds']} -> {last['fds']} | {first['threads']} -> {last['threads']} "
            f"| {first['shm']} -> {last['shm']} |"
        )
    (out / "soak.md").write_text("\n".join(lines) + "\n")
    (out / "soak.json").write_text(json.dumps(results, indent=1))
    print("\n".join(lines))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, samples in results.items():
        ax.plot([s["minutes"] for s in samples], [s["rss_mb"] for s in samples], label=name)
    ax.set_xlabel("minutes")
    ax.set_ylabel("resident MB, train.py and its children")
    ax.set_ylim(bottom=0)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "soak.png", dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="per row (default: 60)")
    parser.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument(
        "--together", action="store_true", help="run the rows at once, sharing the cores"
    )
    parser.add_argument("--out", type=Path, default=Path("."), help="where soak.* go")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    earlier = args.out / "soak.json"
    kept = json.loads(earlier.read_text()) if earlier.is_file() else {}
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        batches = [args.rows] if args.together else [[name] for name in args.rows]
        for names in batches:
            runs = {name: start(name, ROWS[name], args.minutes, where) for name in names}
            try:
                results.update(soak(runs, args.every, where))
            finally:
                for proc in runs.values():  # an interrupted soak leaves no run behind
                    if proc.poll() is None:
                        proc.terminate()
                        proc.wait(timeout=60)
    report({**{k: v for k, v in kept.items() if k in ROWS}, **results}, args.out)


if __name__ == "__main__":
    main()
