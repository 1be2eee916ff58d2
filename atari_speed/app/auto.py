"""Choosing mode, env count, env backend, thread split and precision from the machine at
hand.

``detect()`` looks at cores, memory and GPU. ``calibrate()`` measures, in a few seconds,
what decides the choice: env steps per second on each backend that works here, and the
time of one SGD update of the preset's network and batch. ``choose()`` turns those into a
configuration and says why, line by line; ``train.py`` records that in summary.json and
``train.py --check`` prints it without training.

The rules follow the measurements in docs/train_speed.md and docs/env_speed.md:
- one SGD update costs far more than the env steps of one frame on a CPU (docs/train_speed.md
  has the figures), so there the learner needs every core and actor processes only
  compete with it; parallel mode pays only when
  spare cores can step the envs while the learner trains, and the env share of a frame is
  large enough to matter;
- batched inference costs about the same for 1 or 8 observations on a CPU, so 8 envs cost
  no more per step than one; on a GPU a larger batch of envs is nearly free;
- ale-py's native vector env steps fastest where the pipeline maps onto it, and is kept
  unless another backend measures clearly faster (``ALE_MARGIN``);
- bf16 is taken where one update measured in it beats fp32 by 10%: CPUs with AMX or
  AVX512-BF16 units and recent GPUs run it much faster, other CPUs slower.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from atari_speed.agent.replay import Batch
from atari_speed.agent.schedules import update_schedule
from atari_speed.core.config import Preset, check_consistency, load_preset, parallel_unfollowed
from atari_speed.core.errors import ConfigError

AUTO = "auto"
# How much faster another env backend must step than ale-py's native vector env for auto
# to take it: ale steps in its own threads, without worker processes or pickling, and
# trained faster than a backend its 8-env calibration measured as fast; the calibration
# itself varies from start to start by more than the difference (docs/pong-fast.md, item 11).
ALE_MARGIN = 1.2
# The preset whose rollout width PQN takes when run.envs is auto: read from its file, so
# the two cannot disagree.
PQN_WIDTH_PRESET = "pong-fast"


@cache
def pqn_envs() -> int:
    """PQN's envs per rollout when run.envs is auto: ``run.envs`` of presets/pong-fast.toml."""
    envs = load_preset(PQN_WIDTH_PRESET).run.envs
    if envs == 0:  # an auto width there would leave nothing to read
        raise ConfigError(f"presets/{PQN_WIDTH_PRESET}.toml: [run] envs must be a number")
    return envs


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
    update_ms_bf16: float | None = None  # the same in bf16, when the choice needs it
    cpu: str = ""  # the CPU's model name
    cpu_bf16: list[str] = field(default_factory=list)  # its bf16 units: amx_bf16, avx512_bf16

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
        lines.insert(0, f"cpu: {self.cpu or 'unknown'} (bf16 units: {bf16_units(self)})")
        if self.update_ms is not None:
            lines.append(
                f"one SGD update (this preset's network and batch): {self.update_ms:.1f} ms"
            )
        if self.update_ms_bf16 is not None:
            lines.append(f"the same update in bf16: {self.update_ms_bf16:.1f} ms")
        return lines


def bf16_units(machine: Machine) -> str:
    return ", ".join(machine.cpu_bf16) or "none"


def cpu_info() -> tuple[str, list[str]]:
    """The CPU's model name and its bf16 flags, from /proc/cpuinfo ('' and [] elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "", []
    model = next(
        (ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), ""
    )
    flags_line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    flags = set(flags_line.split(":", 1)[-1].split())
    return model, sorted(flags & {"amx_bf16", "amx_tile", "avx512_bf16"})


def detect() -> Machine:
    import torch

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    gpu = gpu_memory = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        gpu, gpu_memory = props.name, props.total_memory / 1e9
    cpu, cpu_bf16 = cpu_info()
    return Machine(
        cores=cores or 1,
        memory_gb=memory,
        gpu=gpu,
        gpu_memory_gb=gpu_memory,
        torch_threads=torch.get_num_threads(),
        cpu=cpu,
        cpu_bf16=cpu_bf16,
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


def fake_batch(
    batch_size: int, obs_shape: tuple[int, ...], actions: int, discount: float = 0.99
) -> Batch:
    """Random transitions of the right shapes, one in ten terminal (``discount`` is gamma
    to the n-step count): what one SGD update costs does not depend on the values."""
    rng = np.random.default_rng(0)
    return Batch(
        states=rng.integers(0, 255, (batch_size, *obs_shape), dtype=np.uint8),
        next_states=rng.integers(0, 255, (batch_size, *obs_shape), dtype=np.uint8),
        actions=rng.integers(0, actions, batch_size),
        returns=rng.random(batch_size).astype(np.float32),
        discounts=np.where(rng.random(batch_size) < 0.1, 0.0, discount).astype(np.float32),
    )


def _update_ms(
    preset: Preset,
    obs_shape: tuple[int, ...],
    actions: int,
    precisions: tuple[bool, ...],
    envs: int,
) -> list[float]:
    """Milliseconds of one SGD update of the preset's learner (a DQN batch, or one PQN
    minibatch of a rollout of ``envs``) in each precision given (True: bf16): the median of
    5 after one that warms caches. The precisions take turns update by update, so a busy
    moment of the machine slows both alike instead of tipping the choice between them."""
    import torch

    from atari_speed.agent.learning import make_learner
    from atari_speed.agent.networks import build_network, pick_device

    device = pick_device(preset.run.device)
    dqn = preset.dqn
    eager = preset.replace("run", compile=False)  # a compile per precision would cost more
    learners = [
        make_learner(eager, build_network(dqn, obs_shape, actions), device, bf16=bf16)
        for bf16 in precisions
    ]
    size = max(update_schedule(preset, envs).batch, 1)
    batch = fake_batch(size, obs_shape, actions, dqn.gamma**dqn.n_steps)
    # One update is the only thing the two learners take differently: DQN's a sampled
    # batch, PQN's observations, actions and their fixed targets (here the batch's returns).
    if dqn.algorithm == "pqn":
        args = tuple(torch.from_numpy(a) for a in (batch.states, batch.actions, batch.returns))
    else:
        args = (batch,)
    times: list[list[float]] = [[] for _ in learners]
    for _ in range(6):
        for learner, own in zip(learners, times, strict=True):
            start = time.perf_counter()
            learner.step(*args)
            if device.type == "cuda":
                torch.cuda.synchronize()
            own.append(time.perf_counter() - start)
    return [float(np.median(own[1:]) * 1e3) for own in times]  # the first warms caches


def calibrate(machine: Machine, preset: Preset, seconds: float = 1.0) -> Machine:
    """Measure each env backend on the preset's pipeline and one SGD update (~5 s)."""
    from atari_speed.agent.networks import pick_device
    from atari_speed.envs.pipeline import env_pipeline, make_env
    from atari_speed.envs.vector import VECTOR_BACKENDS

    if pick_device(preset.run.device).type != "cuda":
        machine.gpu = machine.gpu_memory_gb = None  # this run will not use it (--device cpu)

    pipeline = env_pipeline(preset.env)
    for backend in VECTOR_BACKENDS:
        try:
            machine.env_steps[backend] = _env_rate(preset, pipeline, backend, seconds)
        except Exception as err:  # any failure means: this backend does not work here
            machine.env_errors[backend] = (str(err).splitlines() or [type(err).__name__])[0]
    probe = make_env(pipeline, preset.env.game)
    shape, actions = tuple(probe.observation_space.shape), int(probe.action_space.n)
    probe.close()
    run, (envs, _) = preset.run, choose_envs(preset, machine)
    if run.precision == AUTO:
        machine.update_ms, machine.update_ms_bf16 = _update_ms(
            preset, shape, actions, (False, True), envs
        )
    else:
        (machine.update_ms,) = _update_ms(preset, shape, actions, (run.precision == "bf16",), envs)
    return machine


def usable_backends(preset: Preset, machine: Machine) -> tuple[dict[str, float], str | None]:
    """The backends that work here and may run this preset, with their steps/s, and why
    the ale backend is set aside, if it is. Raises ConfigError if none is left."""
    from atari_speed.envs.pipeline import env_pipeline
    from atari_speed.envs.vector import ale_start_differs

    env = preset.env
    working = dict(machine.env_steps)
    if preset.run.mode == "parallel":  # actors are processes already: no worker processes
        working.pop("subprocess", None)
    unusable = dict(machine.env_errors)
    set_aside = None
    if "ale" in working:
        set_aside = ale_start_differs(env_pipeline(env))
        if set_aside:
            unusable["ale"] = set_aside
            del working["ale"]
    if not working:
        raise ConfigError(
            "env.backend = 'auto': no env backend works here: "
            + "; ".join(f"{k}: {v}" for k, v in unusable.items())
        )
    return working, set_aside


def choose_backend(preset: Preset, machine: Machine) -> tuple[str, list[str]]:
    """env.backend: as set, or the fastest of those that work here, where ale-py's native
    vector env is taken unless another steps ALE_MARGIN times as fast."""
    if preset.env.backend != AUTO:
        return preset.env.backend, []
    working, set_aside = usable_backends(preset, machine)
    backend = max(working, key=working.get)
    why = "fastest of those that work here"
    if backend != "ale" and working[backend] < ALE_MARGIN * working.get("ale", 0.0):
        backend, why = "ale", f"ale unless another steps {ALE_MARGIN:g}x as fast"
    rates = ", ".join(f"{k} {v:,.0f}" for k, v in working.items()) + " steps/s with 8 envs"
    reasons = [f"env backend {backend}: {why} ({rates})"]
    if set_aside:
        reasons.append(f"env backend ale: not chosen: {set_aside}")
    return backend, reasons


def frame_split(
    preset: Preset, machine: Machine, backend: str, precision: str = "fp32"
) -> tuple[float, float, float]:
    """Milliseconds per frame of env stepping (on ``backend``) and of learning (one update
    in ``precision`` as calibrated here, times the updates per frame of the preset's
    schedule), and the envs' share of the two."""
    env_ms = 1e3 / machine.env_steps.get(backend, 1e3)
    update_ms = (machine.update_ms_bf16 if precision == "bf16" else None) or machine.update_ms
    schedule = update_schedule(preset, choose_envs(preset, machine)[0])
    learn_ms = (update_ms or 0.0) * schedule.updates_per_frame
    share = env_ms / (env_ms + learn_ms) if env_ms + learn_ms > 0 else 0.0
    return env_ms, learn_ms, share


def choose_mode(
    preset: Preset, machine: Machine, backend: str, precision: str = "fp32"
) -> tuple[str, list[str]]:
    """run.mode: as set; else parallel where spare cores can step the envs while the
    learner trains and the envs are a large enough share of a frame; else n-env."""
    if preset.run.mode != AUTO:
        return preset.run.mode, []
    if preset.dqn.algorithm == "pqn":
        return choose_pqn_mode(preset, machine, backend, precision)
    unfollowed = parallel_unfollowed(preset)
    if unfollowed:
        named = " and ".join(f"{field} = {value}" for field, value, _ in unfollowed)
        return "n-env", [f"mode n-env: parallel mode's actors could not follow {named}"]
    env_ms, learn_ms, env_share = frame_split(preset, machine, backend, precision)
    spare = machine.cores >= 4
    if machine.gpu is None and spare and env_share >= 0.2 and backend != "subprocess":
        return "parallel", [
            f"mode parallel: envs take {env_share:.0%} of a frame ({env_ms:.2f} ms env vs "
            f"{learn_ms:.2f} ms learning) and {machine.cores} cores can overlap them"
        ]
    why = (
        "the GPU learns fast, so stepping many envs with one batched forward pass "
        "is what keeps it fed"
        if machine.gpu
        else f"learning takes {1 - env_share:.0%} of a frame ({learn_ms:.2f} ms vs "
        f"{env_ms:.2f} ms env) on {machine.cores} cores: actor processes would only "
        "take cores from the SGD step"
    )
    return "n-env", [f"mode n-env: {why}"]


def choose_pqn_mode(
    preset: Preset, machine: Machine, backend: str, precision: str
) -> tuple[str, list[str]]:
    """PQN: n-env, with the envs' share of a frame said. Parallel mode steps faster where
    that share is large, but its actors play a rollout behind, and where measured it
    solved later (docs/pong-fast.md): it runs when asked for (``run.mode``)."""
    env_ms, learn_ms, env_share = frame_split(preset, machine, backend, precision)
    where = "on the GPU" if machine.gpu else f"on {machine.cores} core(s)"
    return "n-env", [
        f"mode n-env: envs take {env_share:.0%} of a frame ({env_ms:.2f} ms env vs "
        f"{learn_ms:.2f} ms SGD) {where}; PQN's parallel mode steps faster where envs are "
        "a large share, but its actors play a rollout behind and it solved later where "
        "measured (docs/pong-fast.md)"
    ]


def choose_envs(preset: Preset, machine: Machine) -> tuple[int, list[str]]:
    """run.envs: as set; else PQN's rollout width of pong-fast (``pqn_envs``); for DQN 16
    with a GPU, 8 on a CPU."""
    if preset.run.envs != 0:
        return preset.run.envs, []
    if preset.dqn.algorithm == "pqn":
        envs = pqn_envs()
        return envs, [
            f"{envs} envs: PQN's rollout width, as in presets/{PQN_WIDTH_PRESET}.toml (a "
            f"rollout of {envs} x pqn.rollout transitions per round of updates)"
        ]
    if machine.gpu:
        return 16, ["16 envs: a GPU forward pass costs about the same for 1 or 16 observations"]
    return 8, [
        "8 envs: on a CPU one forward pass of 8 observations costs about the same as "
        "of 1, and more envs decorrelate the replay"
    ]


def choose_threads(preset: Preset, machine: Machine, mode: str) -> tuple[int, list[str]]:
    """run.learner_threads: in parallel mode, unless set, all cores but the actor's."""
    threads = preset.run.learner_threads
    if mode != "parallel" or threads != 0:
        return threads, []
    threads = max(machine.cores - 1, 1)
    return threads, [f"learner threads {threads}: one core left for the actor's envs"]


def choose_precision(preset: Preset, machine: Machine) -> tuple[str, list[str]]:
    """run.precision: as set; else bf16 where one update measured in it is 10% faster."""
    if preset.run.precision != AUTO:
        return preset.run.precision, []
    fp32, bf16 = machine.update_ms, machine.update_ms_bf16
    where = machine.gpu or f"{machine.cpu or 'this CPU'} (bf16 units: {bf16_units(machine)})"
    if fp32 is None or bf16 is None:
        return "fp32", ["precision fp32: no update was measured to compare"]
    faster = bf16 < 0.9 * fp32
    return ("bf16" if faster else "fp32"), [
        f"precision {'bf16' if faster else 'fp32'}: one update took {bf16:.1f} ms in bf16 "
        f"against {fp32:.1f} ms in fp32 on {where}"
    ]


def choose(preset: Preset, machine: Machine) -> tuple[Preset, dict[str, Any]]:
    """Fill in the preset's ``auto`` fields; return it and the choices with reasons."""
    backend, why_backend = choose_backend(preset, machine)
    precision, why_precision = choose_precision(preset, machine)
    mode, why_mode = choose_mode(preset, machine, backend, precision)
    envs, why_envs = choose_envs(preset, machine)
    threads, why_threads = choose_threads(preset, machine, mode)
    chosen = preset.replace(
        "run", mode=mode, envs=envs, learner_threads=threads, precision=precision
    )
    chosen = chosen.replace("env", backend=backend)
    check_consistency("auto configuration", chosen)
    choices = {
        "mode": mode,
        "envs": envs,
        "backend": backend,
        "learner_threads": threads,
        "precision": precision,
        "why": why_backend + why_mode + why_envs + why_threads + why_precision,
        "machine": {
            "cores": machine.cores,
            "cpu": machine.cpu,
            "cpu_bf16_units": machine.cpu_bf16,
            "gpu": machine.gpu,
            "env_steps_per_s": {k: round(v) for k, v in machine.env_steps.items()},
            "update_ms": None if machine.update_ms is None else round(machine.update_ms, 2),
            "update_ms_bf16": None
            if machine.update_ms_bf16 is None
            else round(machine.update_ms_bf16, 2),
        },
    }
    return chosen, choices


def needs_choice(preset: Preset) -> bool:
    run = preset.run
    return AUTO in (run.mode, preset.env.backend, run.precision) or run.envs == 0


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
