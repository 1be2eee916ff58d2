"""The training loops and what they share: progress, logs, checkpoints.

``train(preset)`` runs one of the modes:

- ``baseline``: the book's loop on ptan (``ExperienceSourceFirstLast``,
  ``ExperienceReplayBuffer``, ``DQNAgent``, ``EpsilonGreedyActionSelector``, ``TargetNet``),
  one env, the reference row of every comparison;
- ``n-env``: N envs through a vector backend, one batched forward pass picks all N actions,
  transitions go into the frame-deduplicating ``FrameReplay``;
- ``parallel``: actor processes play while the learner trains (``atari_speed.run.parallel``).

Accounting is the same in every mode: ``frames`` counts agent steps summed over all envs,
epsilon follows frames, and one SGD update of ``batch_size`` happens per ``train_every``
frames once the replay holds ``replay.initial`` transitions, whatever the env count.
"""

from __future__ import annotations

import json
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from atari_speed.agent.learner import DQN, Learner, net_for, pick_device, select_actions
from atari_speed.agent.replay import FrameReplay
from atari_speed.core.config import Preset
from atari_speed.core.errors import ConfigError
from atari_speed.core.timing import Profiler, StageTimer
from atari_speed.envs.pipeline import make_env, resolve_game, resolve_pipeline
from atari_speed.envs.vector import make_vector_env

CHECKPOINT_FORMAT = "atari-speed-checkpoint"
CHECKPOINT_VERSION = 1
EMA_ALPHA = 0.98  # the book's smoothing of episode rewards


def epsilon_at(preset: Preset, frames: int) -> float:
    e = preset.explore
    fraction = min(1.0, frames / e.epsilon_frames)
    return e.epsilon_start + fraction * (e.epsilon_final - e.epsilon_start)


def frame_skip(pipeline: dict[str, Any]) -> int:
    return next((s["skip"] for s in pipeline["stages"] if s["wrapper"] == "MaxAndSkip"), 1)


def stack_size(pipeline: dict[str, Any]) -> int:
    return next((s["k"] for s in pipeline["stages"] if s["wrapper"] == "FrameStack"), 1)


# ---------------------------------------------------------------- checkpoints


def save_atomic(obj: dict[str, Any], path: Path) -> None:
    """torch.save to a temp file, fsync, rename: a crash mid-write keeps the old file."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temp file, then rename: a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def network_of(checkpoint: dict[str, Any]) -> str:
    """The checkpoint's ``dqn.network``; checkpoints from before that field are Nature's."""
    return checkpoint.get("network", "nature")


def policy_of(checkpoint: dict[str, Any], device: torch.device) -> torch.nn.Module:
    """The checkpoint's network with its weights, on ``device``, in eval mode, to play."""
    net = DQN(
        tuple(checkpoint["obs_shape"]),
        checkpoint["actions"],
        dueling=checkpoint["dueling"],
        network=network_of(checkpoint),
    ).to(device)
    net.load_state_dict(checkpoint["net"])
    return net.eval()


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint of this app safely (no arbitrary unpickling), or raise ConfigError."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such checkpoint file")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated, corrupt or foreign pickles all land here
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"{path}: not a readable checkpoint ({first[:160]})") from None
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise ConfigError(f"{path}: not an atari-speed checkpoint")
    if data.get("version") != CHECKPOINT_VERSION:
        raise ConfigError(
            f"{path}: checkpoint version {data.get('version')}, this app reads {CHECKPOINT_VERSION}"
        )
    return data


# ---------------------------------------------------------------- progress and logs


@dataclass
class Tracker:
    """Game scores, smoothing, TensorBoard, the progress bar and summary.json."""

    preset: Preset
    pipeline: dict[str, Any]
    run_dir: Path
    device: torch.device
    envs: int
    frames: int = 0
    episodes: int = 0
    smoothed: float | None = None
    best_smoothed: float | None = None
    last_score: float | None = None
    eval_reward: float | None = None
    best_eval: float | None = None
    solved_at: tuple[float, int] | None = None
    seconds_before: float = 0.0  # wall time of earlier runs this one resumed
    learning_from: tuple[float, int] | None = None  # (seconds, frames) at the first update
    choices: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.start = time.perf_counter()
        self.writer = SummaryWriter(str(self.run_dir))
        self.bar = tqdm(
            total=self.preset.run.frames,
            initial=self.frames,
            unit="frame",
            dynamic_ncols=True,
            smoothing=0.05,
            disable=None,
        )
        self._window = (self.start, self.frames)
        self.fps = 0.0

    @property
    def seconds(self) -> float:
        return self.seconds_before + time.perf_counter() - self.start

    def games(self, infos: dict[str, Any]) -> bool:
        """Record games finished this step (vector ``infos``); True if the smoothed score
        reached a new best."""
        if "_episode" not in infos:
            return False
        improved = False
        for i in np.flatnonzero(infos["_episode"]):
            improved |= self.game(float(infos["episode"]["r"][i]), int(infos["episode"]["l"][i]))
        return improved

    def game(self, score: float, length: int) -> bool:
        self.episodes += 1
        self.last_score = score
        self.smoothed = (
            score
            if self.smoothed is None
            else (self.smoothed * EMA_ALPHA + score * (1 - EMA_ALPHA))
        )
        self.writer.add_scalar("episode/reward", score, self.frames)
        self.writer.add_scalar("episode/reward_smoothed", self.smoothed, self.frames)
        self.writer.add_scalar("episode/length", length, self.frames)
        if self.solved_at is None and self.smoothed >= self.preset.run.stop_reward:
            self.solved_at = (self.seconds, self.frames)
        if self.best_smoothed is None or self.smoothed > self.best_smoothed:
            self.best_smoothed = self.smoothed
            return True
        return False

    @property
    def solved(self) -> bool:
        return self.solved_at is not None

    def advance(self, frames: int) -> None:
        self.bar.update(frames - self.frames)
        self.frames = frames

    def log(self, epsilon: float, loss: float | None, buffer_fill: float) -> None:
        now = time.perf_counter()
        start, frames0 = self._window
        if now > start and self.frames > frames0:
            self.fps = (self.frames - frames0) / (now - start)
        self._window = (now, self.frames)
        w, f = self.writer, self.frames
        w.add_scalar("train/epsilon", epsilon, f)
        w.add_scalar("train/fps", self.fps, f)
        w.add_scalar("train/buffer_fill", buffer_fill, f)
        if loss is not None:
            w.add_scalar("train/loss", loss, f)
        post = {"fps": f"{self.fps:.0f}", "games": self.episodes, "eps": f"{epsilon:.2f}"}
        if self.smoothed is not None:
            post["reward"] = f"{self.smoothed:.1f}"
        if loss is not None:
            post["loss"] = f"{loss:.4f}"
        self.bar.set_postfix(post, refresh=False)
        self.write_summary()

    def log_profile(self, process: str, report: dict[str, Any]) -> None:
        """Each stage's share of its process's wall time, as ``profile/[process/]stage``."""
        prefix = "profile/" + (process.replace(" ", "_") + "/" if process else "")
        for row in report["rows"]:
            tag = prefix + row["stage"].replace(" ", "_")
            self.writer.add_scalar(tag, row["share"], self.frames)

    def evaluated(self, reward: float) -> bool:
        self.eval_reward = reward
        self.writer.add_scalar("eval/reward", reward, self.frames)
        if self.best_eval is None or reward > self.best_eval:
            self.best_eval = reward
            return True
        return False

    def summary(self) -> dict[str, Any]:
        seconds = self.seconds
        return {
            "frames": self.frames,
            "emulator_frames": self.frames * frame_skip(self.pipeline),
            "seconds": round(seconds, 2),
            "fps": round(self.frames / seconds, 1) if seconds > 0 else 0.0,
            "fps_after_warmup": self.fps_after_warmup(),
            "episodes": self.episodes,
            "avg_reward": self.smoothed,
            "best_avg_reward": self.best_smoothed,
            "last_reward": self.last_score,
            "eval_reward": self.eval_reward,
            "solved": self.solved,
            "solved_at_seconds": None if self.solved_at is None else round(self.solved_at[0], 2),
            "solved_at_frames": None if self.solved_at is None else self.solved_at[1],
            "mode": self.preset.run.mode,
            "envs": self.envs,
            "device": str(self.device),
            "torch_threads": torch.get_num_threads(),
            "update_to_data": {
                "batch_size": self.preset.dqn.batch_size,
                "train_every": self.preset.dqn.train_every,
                "samples_per_frame": self.preset.dqn.batch_size / self.preset.dqn.train_every,
            },
            "choices": self.choices,
            "preset": self.preset.to_dict(),
            "pipeline": self.pipeline,
        }

    def fps_after_warmup(self) -> float | None:
        """Frames per second since the first SGD update: the training speed proper."""
        if self.learning_from is None:
            return None
        seconds = self.seconds - self.learning_from[0]
        return round((self.frames - self.learning_from[1]) / seconds, 1) if seconds > 0 else None

    def write_summary(self) -> None:
        text = json.dumps(self.summary(), indent=2, default=str)
        write_text_atomic(self.run_dir / "summary.json", text)

    def stats(self) -> dict[str, Any]:
        """What a checkpoint carries to resume the statistics."""
        return {
            "episodes": self.episodes,
            "smoothed": self.smoothed,
            "best_smoothed": self.best_smoothed,
            "best_eval": self.best_eval,
            "seconds": self.seconds,
        }

    def restore(self, stats: dict[str, Any]) -> None:
        self.episodes = int(stats["episodes"])
        self.smoothed, self.best_smoothed = stats["smoothed"], stats["best_smoothed"]
        self.best_eval = stats["best_eval"]
        self.seconds_before = float(stats["seconds"])

    def close(self) -> None:
        self.write_summary()
        self.bar.close()
        self.writer.close()


# ---------------------------------------------------------------- the run


@dataclass
class Run:
    """Everything a mode's loop needs: config, learner, tracker, checkpointing."""

    preset: Preset
    pipeline: dict[str, Any]
    run_dir: Path
    device: torch.device
    learner: Learner
    tracker: Tracker
    obs_shape: tuple[int, ...]
    actions: int
    rng: np.random.Generator
    frames: int = 0
    next_checkpoint: int = 0
    next_log: int = 0
    next_eval: int = 0
    fill: Callable[[], float] = lambda: 0.0  # the mode's replay fill, 0..1
    updates_at_start: int = 0
    evaluation: Evaluation | None = None
    prof: Profiler = field(default_factory=Profiler)  # this process's stages (--profile)
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)  # other processes'

    def checkpoint(
        self,
        name: str = "checkpoint.pt",
        weights_only: bool = False,
        net_state: dict[str, Any] | None = None,
    ) -> None:
        data: dict[str, Any] = {
            "format": CHECKPOINT_FORMAT,
            "version": CHECKPOINT_VERSION,
            "game": self.preset.env.game,
            "pipeline": self.pipeline,
            "preset": self.preset.to_dict(),
            "obs_shape": list(self.obs_shape),
            "actions": self.actions,
            "dueling": self.preset.dqn.dueling,
            "network": self.preset.dqn.network,
            "frames": self.frames,
            "net": net_state if net_state is not None else self.learner.net.state_dict(),
        }
        if not weights_only:
            data.update(
                learner=self.learner.state_dict(),
                stats=self.tracker.stats(),
                rng={"numpy": self.rng.bit_generator.state, "torch": torch.get_rng_state()},
            )
        save_atomic(data, self.run_dir / name)

    def resume(self, data: dict[str, Any]) -> None:
        if data["game"] != resolve_game(self.preset.env.game) or data["actions"] != self.actions:
            raise ConfigError(
                f"--resume: the checkpoint is of {data['game']} ({data['actions']} actions), "
                f"this run is {self.preset.env.game} ({self.actions} actions)"
            )
        ours = {
            "observations": list(self.obs_shape),
            "network": self.preset.dqn.network,
            "dueling": self.preset.dqn.dueling,
        }
        theirs = {
            "observations": list(data["obs_shape"]),
            "network": network_of(data),
            "dueling": data["dueling"],
        }
        if ours != theirs:
            raise ConfigError(
                f"--resume: the checkpoint's network does not fit this preset's: it has "
                f"{theirs}, this run {ours}; resume with the preset that trained it"
            )
        if "learner" not in data:
            raise ConfigError(
                "--resume: this checkpoint holds weights only (a best.pt?); "
                "resume from checkpoint.pt"
            )
        self.learner.load_state_dict(data["learner"])
        self.frames = int(data["frames"])
        self.tracker.frames = self.frames
        self.tracker.bar.reset(total=self.preset.run.frames)
        self.tracker.bar.update(self.frames)
        self.tracker.restore(data["stats"])
        self.rng.bit_generator.state = data["rng"]["numpy"]
        torch.set_rng_state(data["rng"]["torch"])

    def periodic(self, loss_due: bool = True) -> None:
        """Logs, checkpoints and evaluation when their frame counts come round."""
        run = self.preset.run
        if self.tracker.learning_from is None and self.learner.updates > self.updates_at_start:
            self.tracker.learning_from = (self.tracker.seconds, self.frames)
        if self.frames >= self.next_log:
            self.next_log = self.frames + run.log_every
            self.tracker.log(
                epsilon_at(self.preset, self.frames),
                self.learner.pop_loss() if loss_due else None,
                self.fill(),
            )
            if self.prof.enabled:
                self.tracker.log_profile("", self.prof.report())
        if self.frames >= self.next_checkpoint:
            self.next_checkpoint = self.frames + run.checkpoint_every
            if self.frames:
                self.checkpoint()
        ev = self.preset.eval
        if ev.every and self.frames >= self.next_eval and self.evaluation is None:
            self.next_eval = self.frames + ev.every
            self.evaluation = Evaluation(self)
        if self.evaluation is not None and self.evaluation.finished():
            evaluation, self.evaluation = self.evaluation, None
            if self.tracker.evaluated(evaluation.result()):
                self.checkpoint("best.pt", weights_only=True, net_state=evaluation.net_state)

    def game_improved(self) -> None:
        """best.pt follows the smoothed training score when evaluation is off."""
        if not self.preset.eval.every:
            self.checkpoint("best.pt", weights_only=True)

    @property
    def frame_shape(self) -> tuple[int, ...]:
        """One frame of an observation, ``(C, H, W)``: what the replay stores per step."""
        return (self.obs_shape[0] // stack_size(self.pipeline), *self.obs_shape[1:])

    @property
    def done(self) -> bool:
        run = self.preset.run
        out_of_time = run.seconds > 0 and self.tracker.seconds >= run.seconds
        return self.frames >= run.frames or self.tracker.solved or out_of_time


class Evaluation:
    """Plays ``eval.episodes`` games with a snapshot of the network in a background thread,
    so the loop (and in parallel mode, the learner) never waits for it."""

    def __init__(self, run: Run) -> None:
        ev = run.preset.eval
        self.net_state = {k: v.detach().clone() for k, v in run.learner.net.state_dict().items()}
        net = net_for(run.preset.dqn, run.obs_shape, run.actions).to(run.device)
        net.load_state_dict(self.net_state)
        net.eval()
        self.stop = threading.Event()
        self.scores: list[float] = []
        self.error: BaseException | None = None
        seed = run.preset.run.seed + 10_000 + run.frames

        def play() -> None:
            try:
                env = make_env(run.pipeline, run.preset.env.game, seed=seed)
                rng = np.random.default_rng(seed)
                games = play_episodes(
                    env, net, run.device, ev.episodes, ev.epsilon, rng, stop=self.stop
                )
                self.scores = [g["r"] for g in games]
                env.close()
            except BaseException as err:  # reported on the main thread by result()
                self.error = err

        self.thread = threading.Thread(target=play, name="atari-speed-eval", daemon=True)
        self.thread.start()

    def finished(self) -> bool:
        return not self.thread.is_alive()

    def result(self) -> float:
        if self.error is not None:
            raise self.error
        return float(np.mean(self.scores)) if self.scores else float("nan")

    def cancel(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


def play_episodes(
    env: gym.Env,
    net: torch.nn.Module,
    device: torch.device,
    games: int,
    epsilon: float,
    rng: np.random.Generator,
    stop: threading.Event | None = None,
    on_step: Callable[[], bool] | None = None,
) -> list[dict[str, Any]]:
    """Play whole games; return each game's ``info["episode"]`` (unclipped score ``r``,
    agent steps ``l``, emulator ``frames``). ``stop`` ends play early. ``on_step`` is called
    after the first reset and after every step (``play.py`` shows and records the screen);
    returning False ends play early. Either way the game in progress is not returned."""
    finished: list[dict[str, Any]] = []
    obs, _ = env.reset()
    going = on_step is None or on_step()
    while going and len(finished) < games and not (stop is not None and stop.is_set()):
        batch = np.asarray(obs)[None]
        action = int(select_actions(net, batch, epsilon, env.action_space.n, rng, device)[0])
        obs, _, terminated, truncated, info = env.step(action)
        if "episode" in info:
            finished.append(dict(info["episode"]))
        going = on_step is None or on_step()
        if terminated or truncated:
            obs, _ = env.reset()
    return finished


@contextmanager
def interrupt_as_exception() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C, so both save a checkpoint on the way out."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def make_run(preset: Preset, run_dir: Path, resume: str | None, envs: int) -> Run:
    pipeline = resolve_pipeline(preset.env.pipeline, preset.env.image_backend or None)
    probe = make_env(pipeline, preset.env.game)
    obs_shape = tuple(probe.observation_space.shape)
    actions = int(probe.action_space.n)
    probe.close()
    device = pick_device(preset.run.device)
    torch.manual_seed(preset.run.seed)
    net = net_for(preset.dqn, obs_shape, actions)
    learner = Learner(
        net, preset.dqn, device, channels_last=preset.run.channels_last, amp=preset.run.amp
    )
    cuda = device.type == "cuda"
    learner.prof = Profiler(preset.run.profile, sync=torch.cuda.synchronize if cuda else None)
    run_dir.mkdir(parents=True, exist_ok=True)
    tracker = Tracker(preset, pipeline, run_dir, device, envs)
    run = Run(
        preset,
        pipeline,
        run_dir,
        device,
        learner,
        tracker,
        obs_shape,
        actions,
        np.random.default_rng(preset.run.seed),
        prof=learner.prof,
    )
    if resume:
        run.resume(load_checkpoint(resume))
    run.updates_at_start = learner.updates
    run.next_checkpoint = run.frames + preset.run.checkpoint_every
    run.next_eval = run.frames + preset.eval.every
    return run


# ---------------------------------------------------------------- n-env mode


def run_nenv(run: Run) -> None:
    preset, prof = run.preset, run.prof
    dqn = preset.dqn
    venv = make_vector_env(
        run.pipeline,
        preset.env.game,
        preset.run.envs,
        backend=preset.env.backend,
        profile=prof.enabled,
    )
    try:
        obs, _ = venv.reset(seed=preset.run.seed)
        n = venv.num_envs
        replay = FrameReplay(
            preset.replay.size, n, run.frame_shape, stack_size(run.pipeline), dqn.n_steps, dqn.gamma
        )
        run.fill = lambda: len(replay) / preset.replay.size
        if venv.stage_timer is not None:
            prof.split("env step", venv.stage_timer)
        batch = None
        credit = 0
        prof.restart()
        while not run.done:
            epsilon = epsilon_at(preset, run.frames)
            with prof.section("action selection"):
                actions = select_actions(
                    run.learner.net, obs, epsilon, run.actions, run.rng, run.device
                )
            with prof.section("replay add"):
                replay.put_obs(obs)  # before step(), which overwrites obs in place
            with prof.section("env step"):
                obs, rewards, terminated, truncated, infos = venv.step(actions)
            with prof.section("replay add"):
                replay.commit(actions, rewards, terminated | truncated)
            with prof.section("logging + checkpoints"):
                run.frames += n
                run.tracker.advance(run.frames)
                if run.tracker.games(infos):
                    run.game_improved()
            if len(replay) >= preset.replay.initial:
                credit += n
                while credit >= dqn.train_every:
                    credit -= dqn.train_every
                    with prof.section("replay sample"):
                        batch = replay.sample(dqn.batch_size, run.rng, batch)
                    run.learner.step(batch)
            with prof.section("logging + checkpoints"):
                run.periodic()
    finally:
        prof.stop()
        if prof.enabled:
            run.profiles.update(venv.worker_profiles())
        venv.close()


# ---------------------------------------------------------------- baseline mode


class GameLog(gym.Wrapper):
    """Collects finished games' ``info["episode"]`` for loops that never see infos (ptan)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.finished: list[dict[str, Any]] = []

    def step(self, action: Any):
        out = self.env.step(action)
        if "episode" in out[4]:
            self.finished.append(out[4]["episode"])
        return out


def run_baseline(run: Run) -> None:
    """The book's loop, on ptan's own experience source, buffer, agent and selector."""
    import ptan

    preset, prof = run.preset, run.prof
    dqn = preset.dqn
    stages = StageTimer()
    tap = stages.tap if prof.enabled else None
    env = GameLog(make_env(run.pipeline, preset.env.game, seed=preset.run.seed, tap=tap))
    selector = ptan.actions.EpsilonGreedyActionSelector(epsilon=epsilon_at(preset, run.frames))
    device = run.device

    def states_to_tensor(states: list[Any]) -> torch.Tensor:
        return torch.from_numpy(np.stack([np.asarray(s) for s in states])).to(device)

    dqn_agent = ptan.agent.DQNAgent(
        run.learner.net, selector, device=device, preprocessor=states_to_tensor
    )

    class TimedAgent(ptan.agent.BaseAgent):
        """ptan's DQNAgent, its calls timed as action selection."""

        def __call__(self, states: list[Any], agent_states: list[Any]) -> Any:
            with prof.section("action selection"):
                return dqn_agent(states, agent_states)

    agent = TimedAgent()
    source = ptan.experience.ExperienceSourceFirstLast(
        env, agent, gamma=dqn.gamma, steps_count=dqn.n_steps
    )
    buffer = ptan.experience.ExperienceReplayBuffer(source, buffer_size=preset.replay.size)
    run.fill = lambda: len(buffer) / preset.replay.size
    # ptan steps the env inside populate(): the env's stages are split out of that section
    # (ptan populate/<stage>) and "ptan populate/rest" is ptan's experience and buffer
    # bookkeeping, the replay add of this mode.
    prof.split("ptan populate", stages)
    credit = 0
    prof.restart()
    try:
        while not run.done:
            selector.epsilon = epsilon_at(preset, run.frames)
            with prof.section("ptan populate"):
                buffer.populate(1)
            with prof.section("logging + checkpoints"):
                run.frames += 1
                run.tracker.advance(run.frames)
                for game in env.finished:
                    if run.tracker.game(game["r"], game["l"]):
                        run.game_improved()
                env.finished.clear()
            if len(buffer) >= preset.replay.initial:
                credit += 1
                while credit >= dqn.train_every:
                    credit -= dqn.train_every
                    with prof.section("replay sample"):
                        batch = unpack_ptan(buffer.sample(dqn.batch_size))
                    run.learner.step(batch)
            with prof.section("logging + checkpoints"):
                run.periodic()
    finally:
        prof.stop()
        env.close()


def unpack_ptan(batch: list[Any]) -> dict[str, np.ndarray]:
    """ptan ExperienceFirstLast list -> the learner's numpy batch."""
    states = np.stack([np.asarray(e.state) for e in batch])
    dones = np.array([e.last_state is None for e in batch])
    next_states = np.stack(
        [np.asarray(e.state if e.last_state is None else e.last_state) for e in batch]
    )
    return {
        "states": states,
        "next_states": next_states,
        "actions": np.array([e.action for e in batch], dtype=np.int64),
        "returns": np.array([e.reward for e in batch], dtype=np.float32),
        "dones": dones,
    }


# ---------------------------------------------------------------- entry


def mode_loop(mode: str) -> Callable[[Run], None]:
    if mode == "parallel":  # imported here: parallel imports this module
        from atari_speed.run.parallel import run_parallel

        return run_parallel
    return {"baseline": run_baseline, "n-env": run_nenv}[mode]


def default_run_dir(preset: Preset) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stamp}-{preset.name}-{preset.run.mode}"


def train(preset: Preset, run_dir: Path | None = None, resume: str | None = None) -> dict:
    """Train with ``preset``; return the final summary (also in ``run_dir/summary.json``)."""
    from atari_speed.app.auto import resolve

    preset, choices = resolve(preset)  # fills in auto mode / envs / backend, if any
    loop = mode_loop(preset.run.mode)
    run_dir = run_dir or default_run_dir(preset)
    envs = preset.run.envs * (max(preset.run.actors, 1) if preset.run.mode == "parallel" else 1)
    run = make_run(preset, run_dir, resume, envs)
    run.tracker.choices.update(choices)
    interrupted = False
    try:
        with interrupt_as_exception():
            loop(run)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if run.evaluation is not None:
            run.evaluation.cancel()
        run.checkpoint()  # on every exit path: done, solved, Ctrl-C, or an error
        profile = write_profile(run) if run.prof.enabled else None
        run.tracker.close()
    summary = run.tracker.summary()
    summary["interrupted"] = interrupted
    summary["profile"] = profile
    if interrupted:
        raise KeyboardInterrupt(summary)
    return summary


def write_profile(run: Run) -> dict[str, dict[str, Any]]:
    """Every process's profile: to profile.json, and TensorBoard at the last frame."""
    processes = {"main": run.prof.report(), **run.profiles}
    text = json.dumps({"frames": run.frames, "processes": processes}, indent=2)
    write_text_atomic(run.run_dir / "profile.json", text)
    for name, report in processes.items():
        run.tracker.log_profile("" if name == "main" else name, report)
    return processes


def fmt_duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
