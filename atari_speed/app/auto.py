"""Choosing mode, env count, env backend and thread split from the machine at hand.

``detect()`` looks at cores, memory and GPU. ``calibrate()`` measures, in a few seconds,
what decides the choice: env steps per second on each backend that works here, and the
time of one SGD update of the preset's network and batch. ``choose()`` turns those into a
configuration and says why, line by line; ``train.py`` records that in summary.json and
``train.py --check`` prints it without training.

The rules follow the measurements in docs/train_speed.md and docs/env_speed.md:
- one SGD update costs far more than the env steps of one frame on a CPU (31 ms against
  ~0.5 ms on the 2-core machine), so there the learner needs every core and actor
  processes only compete with it; parallel mode pays only when spare cores can step the
  envs while the learner trains, and the env share of a frame is large enough to matter;
- batched inference costs about the same for 1 or 8 observations on a CPU, so 8 envs cost
  no more per step than one; on a GPU a larger batch of envs is nearly free;
- ale-py's native vector env steps fastest where the pipeline maps onto it.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from atari_speed.core.config import Preset, check_consistency
from atari_speed.core.errors import ConfigError

AUTO = "auto"


@dataclass
class Machine:
    """What the machine has, as far as the choice needs."""

    cores: int
    memory_gb: float
    gpu: str | None = None  # the CUDA device's name, if torch sees one
    gpu_memory_gb: float | None = None
    torch_threads: int = 1
    # measured by calibrate(): env steps/s per working backend, error line per failing one
    env_steps: dict[str, float] = field(default_factory=dict)
    env_errors: dict[str, str] = field(default_factory=dict)
    update_ms: float | None = None  # one SGD update of the preset's network and batch

    def describe(self) -> list[str]:
        lines = [
            f"cores: {self.cores}",
            f"memory: {self.memory_gb:.1f} GB",
            "gpu: "
            + (f"{self.gpu} ({self.gpu_memory_gb:.0f} GB)" if self.gpu else "none (CUDA not seen)"),
            f"torch threads: {self.torch_threads}",
        ]
        for backend, rate in self.env_steps.items():
            lines.append(f"env backend {backend}: works, {rate:,.0f} steps/s (8 envs)")
        for backend, error in self.env_errors.items():
            lines.append(f"env backend {backend}: unavailable ({error})")
        if self.update_ms is not None:
            lines.append(
                f"one SGD update (this preset's network and batch): {self.update_ms:.1f} ms"
            )
        return lines


def detect() -> Machine:
    import torch

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    gpu = gpu_memory = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        gpu, gpu_memory = props.name, props.total_memory / 1e9
    return Machine(
        cores=cores or 1,
        memory_gb=memory,
        gpu=gpu,
        gpu_memory_gb=gpu_memory,
        torch_threads=torch.get_num_threads(),
    )


def _env_rate(preset: Preset, pipeline: dict[str, Any], backend: str, seconds: float) -> float:
    from atari_speed.envs.vector import make_vector_env

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback to sync is a failure here
        venv = make_vector_env(pipeline, preset.env.game, 8, backend=backend, seed=0)
    try:
        actions = np.zeros(8, dtype=np.int64)
        venv.step(actions)  # first step: caches and lazy setup
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            venv.step(actions)
            steps += 8
        return steps / (time.perf_counter() - start)
    finally:
        venv.close()


def _update_ms(preset: Preset, obs_shape: tuple[int, ...], actions: int) -> float:
    import torch

    from atari_speed.agent.learner import Learner, net_for, pick_device

    device = pick_device(preset.run.device)
    learner = Learner(
        net_for(preset.dqn, obs_shape, actions),
        preset.dqn,
        device,
        channels_last=preset.run.channels_last,
        amp=preset.run.amp,
    )
    rng = np.random.default_rng(0)
    b = preset.dqn.batch_size
    batch = {
        "states": rng.integers(0, 255, (b, *obs_shape), dtype=np.uint8),
        "next_states": rng.integers(0, 255, (b, *obs_shape), dtype=np.uint8),
        "actions": rng.integers(0, actions, b),
        "returns": rng.random(b).astype(np.float32),
        "dones": rng.random(b) < 0.1,
    }
    times = []
    for _ in range(6):
        start = time.perf_counter()
        learner.step(batch)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return float(np.median(times[1:]) * 1e3)  # the first update warms caches


def calibrate(machine: Machine, preset: Preset, seconds: float = 1.0) -> Machine:
    """Measure each env backend on the preset's pipeline and one SGD update (~5 s)."""
    from atari_speed.agent.learner import pick_device
    from atari_speed.envs.pipeline import make_env, resolve_pipeline
    from atari_speed.envs.vector import VECTOR_BACKENDS

    if pick_device(preset.run.device).type != "cuda":
        machine.gpu = machine.gpu_memory_gb = None  # this run will not use it (--device cpu)

    pipeline = resolve_pipeline(preset.env.pipeline, preset.env.image_backend or None)
    for backend in VECTOR_BACKENDS:
        try:
            machine.env_steps[backend] = _env_rate(preset, pipeline, backend, seconds)
        except Exception as err:  # any failure means: this backend does not work here
            machine.env_errors[backend] = (str(err).splitlines() or [type(err).__name__])[0]
    probe = make_env(pipeline, preset.env.game)
    shape, actions = tuple(probe.observation_space.shape), int(probe.action_space.n)
    probe.close()
    machine.update_ms = _update_ms(preset, shape, actions)
    return machine


def choose(preset: Preset, machine: Machine) -> tuple[Preset, dict[str, Any]]:
    """Fill in the preset's ``auto`` fields; return it and the choices with reasons."""
    from atari_speed.envs.pipeline import resolve_pipeline
    from atari_speed.envs.vector import ale_start_differs

    run, env = preset.run, preset.env
    reasons: list[str] = []
    backend = env.backend
    if backend == AUTO:
        working = dict(machine.env_steps)
        if run.mode == "parallel":  # actors are processes already: no worker processes
            working.pop("subprocess", None)
        unusable = dict(machine.env_errors)
        set_aside = None
        if "ale" in working:
            set_aside = ale_start_differs(resolve_pipeline(env.pipeline, env.image_backend or None))
            if set_aside:
                unusable["ale"] = set_aside
                del working["ale"]
        if not working:
            raise ConfigError(
                "env.backend = 'auto': no env backend works here: "
                + "; ".join(f"{k}: {v}" for k, v in unusable.items())
            )
        backend = max(working, key=working.get)
        reasons.append(
            f"env backend {backend}: fastest of those that work here ("
            + ", ".join(f"{k} {v:,.0f}" for k, v in working.items())
            + " steps/s with 8 envs)"
        )
        if set_aside:
            reasons.append(f"env backend ale: not chosen: {set_aside}")
    mode = run.mode
    env_ms = 1e3 / machine.env_steps.get(backend, 1e3)  # per frame, on the chosen backend
    learn_ms = (machine.update_ms or 0.0) / preset.dqn.train_every  # per frame
    env_share = env_ms / (env_ms + learn_ms) if env_ms + learn_ms > 0 else 0.0
    spare = machine.cores >= 4
    if mode == AUTO:
        if machine.gpu is None and spare and env_share >= 0.2 and backend != "subprocess":
            mode = "parallel"
            reasons.append(
                f"mode parallel: envs take {env_share:.0%} of a frame ({env_ms:.2f} ms env vs "
                f"{learn_ms:.2f} ms learning) and {machine.cores} cores can overlap them"
            )
        else:
            mode = "n-env"
            why = (
                "the GPU learns fast, so stepping many envs with one batched forward pass "
                "is what keeps it fed"
                if machine.gpu
                else f"learning takes {1 - env_share:.0%} of a frame ({learn_ms:.2f} ms vs "
                f"{env_ms:.2f} ms env) on {machine.cores} cores: actor processes would only "
                "take cores from the SGD step"
            )
            reasons.append(f"mode n-env: {why}")
    envs = run.envs
    if envs == 0:
        envs = 16 if machine.gpu else 8
        reasons.append(
            f"{envs} envs: "
            + (
                "a GPU forward pass costs about the same for 1 or 16 observations"
                if machine.gpu
                else "on a CPU one forward pass of 8 observations costs about the same as "
                "of 1 (1.9 ms, docs/train_speed.md), and more envs decorrelate the replay"
            )
        )
    threads = run.learner_threads
    if mode == "parallel" and threads == 0:
        threads = max(machine.cores - 1, 1)
        reasons.append(f"learner threads {threads}: one core left for the actor's envs")
    chosen = preset.replace("run", mode=mode, envs=envs, learner_threads=threads)
    chosen = chosen.replace("env", backend=backend)
    check_consistency("auto configuration", chosen)
    choices = {
        "mode": mode,
        "envs": envs,
        "backend": backend,
        "learner_threads": threads,
        "why": reasons,
        "machine": {
            "cores": machine.cores,
            "gpu": machine.gpu,
            "env_steps_per_s": {k: round(v) for k, v in machine.env_steps.items()},
            "update_ms": None if machine.update_ms is None else round(machine.update_ms, 2),
        },
    }
    return chosen, choices


def needs_choice(preset: Preset) -> bool:
    return preset.run.mode == AUTO or preset.run.envs == 0 or preset.env.backend == AUTO


def resolve(preset: Preset, quiet: bool = False) -> tuple[Preset, dict[str, Any]]:
    """The preset with its ``auto`` fields chosen (calibrating only if it has any)."""
    if not needs_choice(preset):
        return preset, {}
    machine = calibrate(detect(), preset)
    chosen, choices = choose(preset, machine)
    if not quiet:
        print("auto configuration:", flush=True)
        for line in choices["why"]:
            print(f"  {line}", flush=True)
    return chosen, choices
