"""``train(preset)``: plan the run, start its mode's loop, and save on every way out.

The modes differ only in who steps the envs and where (drawn in docs/architecture.md):

- ``baseline``: the book's loop on ptan, one env (``run/baseline.py``);
- ``n-env``: the one actor steps N envs in this process, alternating with updates
  (``run/nenv.py``); also ``parallel`` with ``run.actors = 0``;
- ``parallel``: actor processes play while this process learns (``run/parallel.py``),
  or Ray actors do, on this machine or a cluster (``run/ray_engine.py``).

They share the plan, the learner, the update schedule and the run's bookkeeping
(``run/session.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from atari_speed.core.config import Preset
from atari_speed.core.errors import DiskFullError, disk_full_cause, interrupt_as_exception
from atari_speed.core.memory import keep_freed_memory
from atari_speed.run.baseline import run_baseline
from atari_speed.run.checkpoint import write_text_atomic
from atari_speed.run.nenv import run_nenv
from atari_speed.run.parallel import run_parallel, run_parallel_pqn
from atari_speed.run.plan import Plan, make_plan
from atari_speed.run.rollouts import run_pqn
from atari_speed.run.session import Run

LOOPS: dict[str, Callable[[Run], None]] = {
    "baseline": run_baseline,
    "n-env": run_nenv,
    "parallel": run_parallel,
}
PQN_LOOPS: dict[str, Callable[[Run], None]] = {"n-env": run_pqn, "parallel": run_parallel_pqn}


def loop_for(plan: Plan) -> Callable[[Run], None]:
    """The loop of the plan's mode, algorithm and engine."""
    if plan.mode == "parallel" and plan.preset.run.engine == "ray":
        from atari_speed.run.ray_engine import run_ray  # Ray only when asked for

        return run_ray
    return (PQN_LOOPS if plan.preset.dqn.algorithm == "pqn" else LOOPS)[plan.mode]


def default_run_dir(preset: Preset) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stamp}-{preset.name}-{preset.run.mode}"


def train(
    preset: Preset,
    run_dir: Path | None = None,
    resume: str | None = None,
    choices: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train with ``preset`` (its ``auto`` fields already chosen, ``choices`` saying how);
    return the final summary, also in ``run_dir/summary.json``. Ctrl-C and SIGTERM save a
    checkpoint and raise KeyboardInterrupt carrying the summary."""
    if preset.run.keep_freed_memory:
        keep_freed_memory()
    plan = make_plan(preset, choices)
    if plan.mode == "parallel" and preset.run.engine == "ray" and preset.run.ray_address:
        # a cluster that cannot be joined fails here, before the run directory is made
        from atari_speed.run.ray_engine import join_cluster

        join_cluster(preset.run.ray_address, preset.run.actors)
    run = Run(plan, run_dir or default_run_dir(preset), resume)
    interrupted = False
    try:
        try:
            with interrupt_as_exception():
                loop_for(plan)(run)
                run.final_evaluation()
        except KeyboardInterrupt:
            interrupted = True
        except BaseException:
            finish(run, failing=True)  # best effort: the loop's error is the one to report
            raise
        profile = finish(run, failing=False)
    except Exception as err:
        if disk_full_cause(err) is not None and not isinstance(err, DiskFullError):
            raise DiskFullError(
                f"no space left on {run.run_dir}: free some space or give --run-dir on another "
                "disk (checkpoint.pt and summary.json keep their last good versions)"
            ) from err
        raise
    summary = run.tracker.summary()
    summary["interrupted"] = interrupted
    summary["profile"] = profile
    if interrupted:
        raise KeyboardInterrupt(summary)
    return summary


def finish(run: Run, failing: bool) -> dict[str, dict[str, Any]] | None:
    """Save and close on every way out: done, solved, Ctrl-C, SIGTERM or an error.

    Every step is tried even when one before it fails (a full disk fails the checkpoint,
    yet TensorBoard must still be closed). ``failing``: an error is already on its way
    out, so these steps' own errors are dropped rather than hide it; otherwise the first
    is raised once all have run. Returns the profile, when the run was profiled.
    """
    profile: dict[str, dict[str, Any]] | None = None

    def save_profile() -> None:
        nonlocal profile
        profile = write_profile(run)

    steps: list[Callable[[], Any]] = [run.end_evaluations, run.write_best, run.checkpoint]
    if run.prof.enabled:
        steps.append(save_profile)
    steps.append(run.tracker.close)
    steps.append(run.lock.release)  # last: the directory is complete for whoever comes next
    first: BaseException | None = None
    for step in steps:
        try:
            step()
        except KeyboardInterrupt:  # pressed again while saving: the run is ending anyway
            continue
        except Exception as err:
            first = first or err
    if first is not None and not failing:
        raise first
    return profile


def write_profile(run: Run) -> dict[str, dict[str, Any]]:
    """Every process's profile: to profile.json, and TensorBoard at the last agent step."""
    processes = {"main": run.prof.report(), **run.profiles}
    text = json.dumps({"steps": run.frames, "processes": processes}, indent=2)
    write_text_atomic(run.run_dir / "profile.json", text)
    for name, report in processes.items():
        run.tracker.log_profile("" if name == "main" else name, report)
    return processes
