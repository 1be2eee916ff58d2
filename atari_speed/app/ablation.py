"""Ablation runs: train each ``[[variant]]`` of a preset in turn and compare them.

Every variant logs to its own directory under one parent with the same TensorBoard tags
(``tensorboard --logdir <parent>`` overlays them). The parent gets the book-style table
as ``ablation.md`` and ``ablation.json`` (with the wall time each variant's smoothed
score took to reach -15, 0 and its stop reward), ``ablation.png``, a bar chart of FPS and
time per variant, and ``ablation-curves.png``, every variant's smoothed score against wall
time.
"""

from __future__ import annotations

import json
import os
import re
import signal
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from atari_speed.core.config import ConfigError, Preset
from atari_speed.run.checkpoint import write_text_atomic
from atari_speed.run.tracking import summary_steps

COLUMNS = (
    "variant",
    "FPS",
    "delta FPS",
    "time",
    "delta time",
    "steps to solve",
    "to -15",
    "to 0",
    "to solve",
    "best smoothed reward",
)


def slug(name: str) -> str:
    """A directory name for a variant: lower case, runs of other characters as ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "variant"


def default_parent(preset_name: str) -> Path:
    return Path("runs") / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{preset_name}"


def row(name: str, run_dir: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """One variant's numbers. FPS is after the replay warm-up (training proper) when there
    was any training, else overall; time is to solve if solved, else the whole run."""
    fps = summary.get("fps_after_warmup") or summary["fps"]
    solved = bool(summary["solved"])
    return {
        "variant": name,
        "run_dir": str(run_dir),
        "fps": fps,
        "seconds": summary["solved_at_seconds"] if solved else summary["seconds"],
        "solved": solved,
        "steps": summary_steps(summary),
        "steps_to_solve": summary_steps(summary, "solved_at_steps") if solved else None,
        "best_avg_reward": summary["best_avg_reward"],
        "interrupted": bool(summary.get("interrupted")),
        # seconds to the first smoothed -15, 0 and stop reward, where reached
        "to_seconds": {
            level: when["seconds"] for level, when in summary.get("reached", {}).items()
        },
        "stop_reward": summary["preset"]["run"]["stop_reward"],
    }


def with_deltas(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add each row's change in FPS and time against the first row, in percent."""
    if not rows:
        return rows
    first = rows[0]
    for r in rows:
        r["delta_fps"] = (r["fps"] / first["fps"] - 1) * 100 if first["fps"] else None
        r["delta_seconds"] = (
            (r["seconds"] / first["seconds"] - 1) * 100 if first["seconds"] else None
        )
    return rows


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:+.1f}%"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def markdown(title: str, rows: list[dict[str, Any]]) -> str:
    lines = [
        f"# {title}",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|---|" + "---:|" * (len(COLUMNS) - 1),
    ]
    for r in rows:
        time_text = _minutes(r["seconds"]) + ("" if r["solved"] else " (budget, not solved)")
        if r["interrupted"]:
            time_text += " (interrupted)"
        best = r["best_avg_reward"]
        solve_steps = r["steps_to_solve"]
        to = r.get("to_seconds", {})
        levels = ("-15", "0", f"{r.get('stop_reward', 18.0):g}")
        reached = " | ".join(_minutes(to[k]) if k in to else "" for k in levels)
        lines.append(
            f"| {r['variant']} | {r['fps']:.1f} | {_pct(r['delta_fps'])} | {time_text} | "
            f"{_pct(r['delta_seconds'])} | "
            f"{'' if solve_steps is None else f'{solve_steps:,}'} | {reached} | "
            f"{'' if best is None else f'{best:.1f}'} |"
        )
    lines += [
        "",
        "FPS: agent steps per second summed over envs, after the replay warm-up. Time: to "
        "solve (smoothed reward >= stop_reward), else the whole run. To -15 / 0 / solve: "
        "wall time until the smoothed game score first reached it. Deltas are against "
        "the first row.",
    ]
    return "\n".join(lines) + "\n"


SCORE_COLUMNS = ("seconds", "steps", "score", "smoothed")  # scores.csv's, in order


def read_scores(run_dir: Path) -> np.ndarray:
    """A run's scores.csv as an array, one row a game, columns ``SCORE_COLUMNS`` (agent
    steps; runs of earlier versions head that column ``frames``, with the same count);
    shape (0, 4) before its first game. A line cut short (a run killed as it wrote it) is
    left out."""
    rows = []
    for line in (run_dir / "scores.csv").read_text().splitlines()[1:]:
        try:
            row = [float(cell) for cell in line.split(",")]
        except ValueError:  # an empty cell: the line was cut short
            continue
        if len(row) == len(SCORE_COLUMNS):
            rows.append(row)
    return np.array(rows, dtype=float).reshape(-1, len(SCORE_COLUMNS))


def save_figure(fig: Any, path: Path) -> None:
    """Lay out, write to a temp file, rename (a reader never sees half a PNG), close."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)


def plot(title: str, rows: list[dict[str, Any]], path: Path) -> None:
    """Bars of FPS and time per variant, side by side."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    names = [r["variant"] for r in rows]
    height = 1.2 + 0.45 * len(rows)
    fig, (ax_fps, ax_time) = plt.subplots(1, 2, figsize=(11, height), sharey=True)
    ax_fps.barh(names, [r["fps"] for r in rows], color="tab:blue")
    ax_fps.set_xlabel("FPS (agent steps/s, higher is better)")
    ax_time.barh(
        names,
        [r["seconds"] / 60 for r in rows],
        color=["tab:green" if r["solved"] else "tab:gray" for r in rows],
    )
    ax_time.set_xlabel("minutes (green: to solve, gray: budget, not solved)")
    ax_fps.invert_yaxis()  # first variant on top, as in the table
    fig.suptitle(title)
    save_figure(fig, path)


def plot_curves(title: str, rows: list[dict[str, Any]], path: Path) -> None:
    """Every variant's smoothed game score against wall time (from its scores.csv)."""
    runs = [(r["variant"], Path(r["run_dir"])) for r in rows]
    plot_scores(title, runs, path, by_steps=False)


def plot_scores(
    title: str,
    runs: list[tuple[str, Path]],
    path: Path,
    by_steps: bool,
    line_at: float | None = None,
) -> None:
    """Each run's smoothed score (its scores.csv) against wall time in minutes, or against
    agent steps in millions; ``line_at`` draws a dashed level (the stop reward)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    column, scale = (1, 1e6) if by_steps else (0, 60.0)
    fig, ax = plt.subplots(figsize=(9, 5))
    for label, run_dir in runs:
        log = run_dir / "scores.csv"
        if not log.is_file():
            continue
        data = read_scores(run_dir)
        if len(data):
            ax.plot(data[:, column] / scale, data[:, 3], label=label)
    if line_at is not None:
        ax.axhline(line_at, color="gray", linestyle="--", linewidth=1)
    xlabel = "agent steps (millions, over all envs)" if by_steps else "wall time (minutes)"
    ax.set_xlabel(xlabel)
    ax.set_ylabel("smoothed game score")
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=8)
    ax.set_title(title)
    save_figure(fig, path)


def write_outputs(title: str, parent: Path, rows: list[dict[str, Any]]) -> str:
    table = markdown(title, rows)
    write_text_atomic(parent / "ablation.md", table)
    write_text_atomic(
        parent / "ablation.json", json.dumps({"title": title, "rows": rows}, indent=2)
    )
    if rows:
        plot(title, rows, parent / "ablation.png")
        plot_curves(title, rows, parent / "ablation-curves.png")
    return table


def check_envs(variants: list[tuple[str, Preset]]) -> None:
    """Refuse, naming the variant, one whose pipeline file does not read or that the ale
    backend, asked for by name, cannot play: such a variant fails only when its envs are
    built, which in an ablation is after the variants before it have trained."""
    from atari_speed.envs.pipeline import env_pipeline
    from atari_speed.envs.vector import ale_start_differs

    for name, preset in variants:
        env = preset.env
        try:
            pipeline = env_pipeline(env)
        except ConfigError as err:
            raise ConfigError(f"variant {name!r}: {err}") from None
        why = ale_start_differs(pipeline) if env.backend == "ale" else None
        if why:
            raise ConfigError(f"variant {name!r}: {why}")


def run_ablation(
    preset_name: str,
    variants: list[tuple[str, Preset]],
    parent: Path | None = None,
    concurrent: bool = False,
    address: str | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """Train every variant, in turn or (``concurrent``) all at once as Ray tasks, on this
    machine or on the Ray cluster at ``address``; return the table and its rows. Ctrl-C
    stops the ablation after saving the table of the variants that ran (the last one
    partial). Each variant's auto fields are chosen just before it trains, on the cores
    it is given."""
    parent = parent or default_parent(preset_name)
    parent.mkdir(parents=True, exist_ok=True)
    how = "at once" if concurrent else "in turn"
    title = f"{preset_name}: {len(variants)} variants, {how}"
    dirs = [parent / f"{i:02d}-{slug(name)}" for i, (name, _) in enumerate(variants, 1)]
    if concurrent:
        rows = run_concurrently(
            variants, dirs, lambda done: write_outputs(title, parent, done), address
        )
        return write_outputs(title, parent, with_deltas(rows)), rows
    from atari_speed.app.auto import resolve
    from atari_speed.run.training import train

    rows: list[dict[str, Any]] = []
    for i, ((name, preset), run_dir) in enumerate(zip(variants, dirs, strict=True), 1):
        print(f"[{i}/{len(variants)}] {name} -> {run_dir}", flush=True)
        try:
            chosen, choices = resolve(preset)
            summary = train(chosen, run_dir, choices=choices)
        except KeyboardInterrupt as interrupt:
            if interrupt.args:
                rows.append(row(name, run_dir, interrupt.args[0]))
            write_outputs(title, parent, with_deltas(rows))
            raise KeyboardInterrupt(parent) from None
        rows.append(row(name, run_dir, summary))
        write_outputs(title, parent, with_deltas(rows))  # a partial table survives a crash
    return write_outputs(title, parent, with_deltas(rows)), rows


def train_on(cores: list[int] | int, preset: Preset, run_dir: Path) -> dict[str, Any]:
    """One variant as a Ray task: pinned to ``cores`` (so auto, torch and the envs see
    only those) or, on a cluster's node, given that many of its cores by Ray (this
    machine's core numbers mean nothing there); its auto fields chosen there, trained;
    its summary. Ctrl-C (Ray's cancel) ends it with a checkpoint, as in a terminal."""
    import torch

    from atari_speed.app.auto import resolve
    from atari_speed.run.training import train

    if isinstance(cores, int):
        torch.set_num_threads(cores)
    else:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cores)
        torch.set_num_threads(len(cores))
    chosen, choices = resolve(preset)
    try:
        return train(chosen, run_dir, choices=choices)
    except KeyboardInterrupt as interrupt:
        return interrupt.args[0] if interrupt.args else {}


def partial_row(name: str, run_dir: Path) -> dict[str, Any] | None:
    """The row of a variant stopped part way, from the summary.json it left, if any."""
    path = run_dir / "summary.json"
    if not path.is_file():
        return None
    return {**row(name, run_dir, json.loads(path.read_text())), "interrupted": True}


def run_concurrently(
    variants: list[tuple[str, Preset]], dirs: list[Path], partial: Any, address: str | None = None
) -> list[dict[str, Any]]:
    """Every variant at once, each a Ray task on its share of this machine's cores, or of
    the cores of the cluster at ``address`` (and a GPU of its own where there is one per
    variant); the rows, in the variants' order."""
    from atari_speed.run.plan import require_ray

    ray = require_ray()
    import torch

    sigterm = signal.getsignal(signal.SIGTERM)  # ray.init replaces it with an exit
    cores: list[int] = []
    if address:
        from atari_speed.run.ray_engine import join_cluster

        join_cluster(address)  # one line saying what to do when it cannot
        nodes = [n["Resources"] for n in ray.nodes() if n["Alive"]]
        cpus = [int(r.get("CPU", 0)) for r in nodes]
        share = max(1, min(max(cpus), sum(cpus) // len(variants)))  # a task is on one node
        gpus = int(sum(r.get("GPU", 0) for r in nodes))
        dirs = [d.resolve() for d in dirs]  # a task's working directory is its node's
    else:
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        cores = cores or list(range(os.cpu_count() or 1))
        share = max(1, len(cores) // len(variants))
        gpus = torch.cuda.device_count()
        ray.init(
            address="local",  # a Ray of its own, not a cluster `ray start` left running
            num_cpus=max(len(cores), share * len(variants)),
            num_gpus=gpus,
            include_dashboard=False,
            logging_level="ERROR",
            log_to_driver=False,
        )
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # as Ctrl-C: cancel, save
    # No retries: a variant that dies is reported, not rerun from frame 0 into its directory.
    task = ray.remote(train_on).options(
        num_cpus=share, num_gpus=1 if gpus >= len(variants) else 0, max_retries=0
    )
    pending: dict[Any, int] = {}
    done: dict[int, dict[str, Any]] = {}
    try:
        for i, ((name, preset), run_dir) in enumerate(zip(variants, dirs, strict=True)):
            mine: list[int] | int = share
            where = f"{share} CPU(s) on the cluster at {address}"
            if not address:
                mine = [cores[(i * share + j) % len(cores)] for j in range(share)]
                where = f"cores {mine}"
            print(f"[{i + 1}/{len(variants)}] {name} -> {run_dir} ({where})", flush=True)
            pending[task.remote(mine, preset, run_dir)] = i
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in ready:
                i = pending.pop(ref)
                name = variants[i][0]
                done[i] = row(name, dirs[i], ray.get(ref, timeout=60))
                print(f"{name}: {'solved' if done[i]['solved'] else 'done'}", flush=True)
                partial(with_deltas([done[k] for k in sorted(done)]))
        return [done[i] for i in range(len(variants))]
    except KeyboardInterrupt:
        for ref in pending:  # each task saves its checkpoint on the way out: let it
            ray.cancel(ref)
        ray.wait(list(pending), num_returns=len(pending), timeout=120)
        rows = [done.get(i) or partial_row(variants[i][0], dirs[i]) for i in range(len(dirs))]
        partial(with_deltas([r for r in rows if r is not None]))
        raise KeyboardInterrupt(dirs[0].parent) from None
    finally:
        ray.shutdown()
        signal.signal(signal.SIGTERM, sigterm)
