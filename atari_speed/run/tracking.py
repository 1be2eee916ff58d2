"""What a run reports: game scores, the step counter, TensorBoard, the progress bar and
summary.json.

``Tracker`` owns the run's one step counter (agent steps summed over all envs; its
``frames`` attribute, an older name); the loops advance it and everything else reads it.
summary.json says ``steps`` for agent steps and ``emulator_frames`` for ALE's frames
(steps x the frame skip); summaries of earlier versions said ``frames`` for agent steps,
which ``summary_steps`` reads too.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from atari_speed.agent.actor import Game
from atari_speed.agent.schedules import update_schedule
from atari_speed.core.errors import ConfigError
from atari_speed.run.checkpoint import write_text_atomic
from atari_speed.run.evaluation import eval_cpu_share
from atari_speed.run.plan import Plan

EMA_ALPHA = 0.98  # the book's smoothing of episode rewards
MILESTONES = (-15.0, 0.0)  # smoothed scores whose first time is recorded, with stop_reward
LINE_EVERY = 30.0  # seconds between progress lines when the output is not a terminal


def games_to_reach(smoothed: float | None, level: float, target: float) -> float:
    """The finished games that bring the smoothed score (EMA_ALPHA) from ``smoothed`` to
    ``target`` if every one scores exactly ``level``: what the book's rule asks of an agent
    whose games average ``level`` (uneven games can get there sooner or later). 0 where it
    is there already, infinite where ``level`` is at or below ``target`` (the average only
    nears it); ``smoothed`` None (no game yet): the first game sets the smoothed score."""
    if smoothed is None:
        return 1.0 if level >= target else math.inf
    if smoothed >= target:
        return 0.0
    if level <= target:
        return math.inf
    # target - level = (smoothed - level) * EMA_ALPHA ** n, solved for the whole n
    games = math.log((level - target) / (level - smoothed)) / math.log(EMA_ALPHA)
    return float(math.ceil(games - 1e-9))  # the logs' rounding can put a whole count a hair over


@dataclass
class Scores:
    """Whole-game scores: the count, the last, the smoothed (EMA) and its best, and when
    (seconds, agent steps) the smoothed score first reached each milestone and ``stop_reward``
    (solved)."""

    stop_reward: float
    episodes: int = 0
    last: float | None = None
    smoothed: float | None = None
    best_smoothed: float | None = None
    solved_at: tuple[float, int] | None = None
    reached: dict[str, tuple[float, int]] = field(default_factory=dict)  # "-15" -> when

    def add(self, game: Game, seconds: float, frames: int) -> bool:
        """Count a finished game; True if the smoothed score reached a new best."""
        self.episodes += 1
        self.last = game.score
        prev = self.smoothed
        self.smoothed = (
            game.score if prev is None else prev * EMA_ALPHA + game.score * (1 - EMA_ALPHA)
        )
        if self.solved_at is None and self.smoothed >= self.stop_reward:
            self.solved_at = (seconds, frames)
        for level in (*MILESTONES, self.stop_reward):
            if self.smoothed >= level:
                self.reached.setdefault(f"{level:g}", (seconds, frames))
        if self.best_smoothed is None or self.smoothed > self.best_smoothed:
            self.best_smoothed = self.smoothed
            return True
        return False


@dataclass
class Record:
    """What a run has to tell of its past: its games' scores, its evaluations, when it
    began to learn, its wall and CPU time and auto's choices. A checkpoint saves it whole and a
    resume restores it whole (``Tracker.stats``, ``Tracker.restore``), so a field added
    here goes on across a resume with nothing else to write."""

    scores: Scores
    eval_reward: float | None = None  # the last evaluation's mean: the last greedy score
    best_eval: float | None = None
    # (seconds, agent steps) of the first evaluation whose mean reached stop_reward: the greedy
    # agent's solve, beside the training games' smoothed one
    eval_solved_at: tuple[float, int] | None = None
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    learning_from: tuple[float, int] | None = None  # (seconds, steps) of the 1st update
    # Wall time of the runs before this process's; in a checkpoint, all of it up to then.
    seconds_before: float = 0.0
    cpu_seconds_before: float = 0.0  # the same for the process's CPU time (all its threads)
    choices: dict[str, Any] = field(default_factory=dict)  # auto's, and the mode's loop's
    # the agent steps at which the run was resumed: every env's game restarts there, so
    # its games after are not those of the run uninterrupted (docs/usage.md, --resume)
    resumed_at: list[int] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        """The record ``dataclasses.asdict`` made ``data`` of. Evaluations saved by earlier
        versions say ``frames`` for their agent steps: read as ``steps``."""
        data = dict(data)
        data["evaluations"] = [
            {("steps" if k == "frames" else k): v for k, v in e.items()}
            for e in data.get("evaluations", [])
        ]
        try:
            return cls(scores=Scores(**data.pop("scores")), **data)
        except TypeError as err:  # a field this version does not know: a newer checkpoint
            raise ConfigError(f"--resume: the checkpoint's record does not fit ({err})") from None

    def restop(self, stop_reward: float) -> None:
        """Judge the run's past by ``stop_reward``, which a --set given with --resume may
        have changed: the smoothed score is solved from the first time it reached a level
        the record holds (the milestones and the old stop reward) at or above it (lowered
        below the best, the latest it can have been), the greedy agent from the first
        evaluation that played it. Without this a run solved at 18 and resumed to go on
        to 20 stopped at once, solved."""
        scores = self.scores
        if stop_reward == scores.stop_reward:
            return
        scores.stop_reward = stop_reward
        reached = scores.reached.items()
        scores.solved_at = min(
            (at for level, at in reached if float(level) >= stop_reward), default=None
        )
        self.eval_solved_at = next(
            (
                (float(e["seconds"]), int(e["steps"]))
                for e in self.evaluations
                if solves_greedy(e, stop_reward)
            ),
            None,
        )

    @classmethod
    def from_old_stats(cls, stats: dict[str, Any], stop_reward: float) -> Record:
        """The part of a record that checkpoints from before ``Record`` carried (no
        evaluations, last scores, learning start or choices)."""
        solved = stats.get("eval_solved_at")
        reached = {k: (float(v[0]), int(v[1])) for k, v in stats.get("reached", {}).items()}
        scores = Scores(
            stop_reward,
            episodes=int(stats["episodes"]),
            smoothed=stats["smoothed"],
            best_smoothed=stats["best_smoothed"],
            solved_at=reached.get(f"{stop_reward:g}"),
            reached=reached,
        )
        return cls(
            scores=scores,
            best_eval=stats["best_eval"],
            eval_solved_at=None if solved is None else (float(solved[0]), int(solved[1])),
            seconds_before=float(stats["seconds"]),
        )


class Tracker:
    """The frame counter, scores, evaluation results, wall time, logs and summary.json."""

    def __init__(self, plan: Plan, run_dir: Path) -> None:
        self.plan, self.run_dir = plan, run_dir
        self.record = Record(Scores(plan.preset.run.stop_reward), choices=dict(plan.choices))
        self.frames = 0
        self.epsilon: float | None = None
        self.loss: float | None = None
        self.fps = 0.0
        self.start = time.perf_counter()
        self.cpu_start = time.process_time()
        self._stopped: tuple[float, float] | None = None  # stop_clocks': (wall, CPU)
        self._window = (self.start, 0)
        # Made at the first scalar: a resume that fails before it leaves TensorBoard's
        # files as they were (``held``).
        self._writer: SummaryWriter | None = None
        self._purge_step: int | None = None  # TensorBoard hides the directory's past it
        # A resumed run writes nothing to its directory until it has played a frame, and
        # only then drops what the logs hold past the checkpoint (``_cut``): a resume that
        # fails to start (a missing ROM, a full disk) leaves the directory as it found it.
        self.held = False
        self._cut: tuple[int | None, int] | None = None  # drop_logs_after's, when held
        self.bar = tqdm(
            total=plan.preset.run.steps,
            unit="step",
            dynamic_ncols=True,
            smoothing=0.05,
            disable=None,
        )
        # Where there is no terminal (a file, nohup, CI) tqdm draws nothing: print a line
        # every LINE_EVERY seconds and at each evaluation instead.
        self.lines = bool(self.bar.disable)
        self.last_line = self.start

    @property
    def scores(self) -> Scores:
        return self.record.scores

    @property
    def best_eval(self) -> float | None:
        return self.record.best_eval

    @property
    def seconds(self) -> float:
        if self._stopped is not None:
            return self._stopped[0]
        return self.record.seconds_before + time.perf_counter() - self.start

    @property
    def cpu_seconds(self) -> float:
        """The run's CPU time so far: this process's, all threads, across resumes."""
        if self._stopped is not None:
            return self._stopped[1]
        return self.record.cpu_seconds_before + time.process_time() - self.cpu_start

    def stop_clocks(self) -> None:
        """The run's wall and CPU time end here: what follows (eval.at_end's evaluation)
        is not the run's, so its FPS and the checkpoint's clocks leave it out."""
        self._stopped = (self.seconds, self.cpu_seconds)

    @property
    def writer(self) -> SummaryWriter:
        if self._writer is None:
            self._writer = SummaryWriter(str(self.run_dir), purge_step=self._purge_step)
        return self._writer

    def advance(self, frames: int) -> None:
        """Count ``frames`` more agent steps."""
        if frames > 0 and self.held:
            self.go_on()
        self.frames += frames
        self.bar.update(frames)

    def go_on(self) -> None:
        """The resumed run has played: from now on it writes to its directory, whose logs
        are first cut back to the checkpoint (``drop_logs_after``) if they are its own."""
        self.held = False
        if self._cut is not None:
            self.drop_logs_after(*self._cut)
            self._cut = None

    def game(self, game: Game) -> bool:
        """Record a finished game; True if the smoothed score reached a new best."""
        if self.held:
            self.go_on()
        seconds = self.seconds
        improved = self.scores.add(game, seconds, self.frames)
        with open(self.scores_path, "a") as log:  # the curve against wall time
            if log.tell() == 0:
                log.write("seconds,steps,score,smoothed\n")
            log.write(f"{seconds:.2f},{self.frames},{game.score:g},{self.scores.smoothed:.4f}\n")
        w, f = self.writer, self.frames
        w.add_scalar("episode/reward", game.score, f)
        w.add_scalar("episode/reward_smoothed", self.scores.smoothed, f)
        w.add_scalar("episode/length", game.length, f)
        return improved

    def note_choices(self, **choices: Any) -> None:
        """Record what the mode's loop chose (actor pids, threads) in summary.json now."""
        self.record.choices.update(choices)
        self.write_summary()

    def learning_started(self) -> None:
        if self.record.learning_from is None:
            self.record.learning_from = (self.seconds, self.frames)

    def log_pace(self, learning_rate: float, updates: int, adam_eps: float) -> None:
        """TensorBoard's view of the schedules that follow the score: the learning rate now,
        the SGD updates made so far (their slope over agent steps is the update-to-data
        ratio, which ``pqn.updates_at_stop`` and ``pqn.updates_at_start`` set) and the
        optimizer's epsilon (``pqn.adam_eps_at_stop`` raises it)."""
        if self.held:
            return
        self.writer.add_scalar("train/learning_rate", learning_rate, self.frames)
        self.writer.add_scalar("train/sgd_updates", updates, self.frames)
        self.writer.add_scalar("train/adam_eps", adam_eps, self.frames)

    def log(self, epsilon: float, loss: float | None, buffer_fill: float) -> None:
        """TensorBoard scalars, the progress bar's figures and summary.json, now."""
        if self.held:  # nothing played since the checkpoint, whose figures are logged
            return
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
        self.epsilon, self.loss = epsilon, loss
        post = {"fps": f"{self.fps:.0f}", "games": self.scores.episodes, "eps": f"{epsilon:.3g}"}
        if self.scores.smoothed is not None:
            post["reward"] = f"{self.scores.smoothed:.1f}"
        if loss is not None:
            post["loss"] = f"{loss:.4f}"
        if self.record.eval_reward is not None:
            post["greedy"] = self.greedy_text()
        self.bar.set_postfix(post, refresh=False)
        if self.lines and now - self.last_line >= LINE_EVERY:
            self.print_line()
        self.write_summary()

    def greedy_text(self) -> str:
        """The last evaluation's mean, or "<=" the most it could have been where it was
        cut short (``eval.max_game_score``)."""
        assert self.record.eval_reward is not None
        last = self.record.evaluations[-1] if self.record.evaluations else {}
        return ("<=" if last.get("at_most") else "") + f"{self.record.eval_reward:.1f}"

    def progress_line(self) -> str:
        """Agent steps, FPS, games, smoothed and greedy score, epsilon, loss and the time
        left to the budget, on one line."""
        run = self.plan.preset.run
        parts = [f"steps {self.frames:,}/{run.steps:,} ({self.frames / run.steps:.0%})"]
        parts.append(f"{self.fps:,.0f} FPS")
        parts.append(f"games {self.scores.episodes:,}")
        smoothed = self.scores.smoothed
        parts.append("smoothed " + ("-" if smoothed is None else f"{smoothed:.1f}"))
        if self.record.eval_reward is not None:
            parts.append(f"greedy {self.greedy_text()}")
        if self.epsilon is not None:
            parts.append(f"eps {self.epsilon:.3f}")
        if self.loss is not None:
            parts.append(f"loss {self.loss:.4g}")
        # A run ends on a whole rollout or batch, a little past run.steps: nothing left then.
        left = max(run.steps - self.frames, 0) / self.fps if self.fps > 0 else None
        if run.seconds > 0:
            by_clock = max(run.seconds - self.seconds, 0.0)
            left = by_clock if left is None else min(left, by_clock)
        if left is not None:
            parts.append(f"ETA {_clock(left)}")
        return f"[{_clock(self.seconds)}] " + " | ".join(parts)

    def print_line(self) -> None:
        self.last_line = time.perf_counter()
        print(self.progress_line(), file=sys.stderr, flush=True)

    def say(self, text: str) -> None:
        """One line on stderr, above the progress bar where there is one."""
        self.bar.write(text, file=sys.stderr)

    def log_profile(self, process: str, report: dict[str, Any]) -> None:
        """Each stage's share of its process's wall time, as ``profile/[process/]stage``."""
        if self.held:
            return
        prefix = "profile/" + (process.replace(" ", "_") + "/" if process else "")
        for row in report["rows"]:
            tag = prefix + row["stage"].replace(" ", "_")
            self.writer.add_scalar(tag, row["share"], self.frames)

    def evaluated(
        self,
        reward: float,
        steps: int,
        seconds: float,
        cpu_seconds: float = 0.0,
        games: Sequence[float] = (),
        run_cpu_seconds: float | None = None,
        final: bool = False,
        average: bool = False,
        at_most: bool = False,
    ) -> bool:
        """Record the mean score of an evaluation of the weights at agent step ``steps``
        (and ``seconds``), with each game's score (a low mean can be one lost game or
        all of them), what its games cost (``cpu_seconds``) and the run's CPU time when
        it began (``run_cpu_seconds``); ``final``: ``eval.at_end``'s, after the run ended;
        ``average``: it played the weights' average (``eval.average_steps``); ``at_most``:
        it was cut short (``eval.max_game_score``), and ``reward`` is only the most its mean
        could have been: never the best, nor in the ``eval/reward`` curve. True if it is
        the best so far."""
        record = self.record
        record.eval_reward = reward
        entry = {
            "steps": steps,
            "seconds": round(seconds, 2),
            "reward": reward,
            "cpu_seconds": round(cpu_seconds, 2),
            "run_cpu_seconds": None if run_cpu_seconds is None else round(run_cpu_seconds, 2),
            "games": [float(g) for g in games],
            "average": average,
        }
        if final:
            entry["final"] = True
        if at_most:
            entry["at_most"] = True
        record.evaluations.append(entry)
        self.writer.add_scalar("eval/at_most" if at_most else "eval/reward", reward, steps)
        if record.eval_solved_at is None and solves_greedy(entry, self.plan.preset.run.stop_reward):
            record.eval_solved_at = (seconds, steps)
        if self.lines:
            self.print_line()
        if at_most:
            return False
        if record.best_eval is None or reward > record.best_eval:
            record.best_eval = reward
            return True
        return False

    def summary(self) -> dict[str, Any]:
        seconds, record, preset = self.seconds, self.record, self.plan.preset
        s, greedy, cpu = record.scores, record.eval_solved_at, self.cpu_seconds
        return {
            "steps": self.frames,
            "emulator_frames": self.frames * self.plan.frame_skip,
            "seconds": round(seconds, 2),
            "fps": round(self.frames / seconds, 1) if seconds > 0 else 0.0,
            "fps_after_warmup": self.fps_after_warmup(),
            "episodes": s.episodes,
            "avg_reward": s.smoothed,
            "best_avg_reward": s.best_smoothed,
            "last_reward": s.last,
            "eval_reward": record.eval_reward,
            "best_eval_reward": record.best_eval,
            # the greedy agent's solve: the first evaluation whose mean reached stop_reward
            "eval_solved_at_seconds": None if greedy is None else round(greedy[0], 2),
            "eval_solved_at_steps": None if greedy is None else greedy[1],
            "evaluations": record.evaluations,
            "cpu_seconds": round(cpu, 2),
            "eval_cpu_share": eval_cpu_share(record.evaluations, cpu),
            "solved": s.solved_at is not None,
            "solved_at_seconds": None if s.solved_at is None else round(s.solved_at[0], 2),
            "solved_at_steps": None if s.solved_at is None else s.solved_at[1],
            "reached": {
                level: {"seconds": round(when[0], 2), "steps": when[1]}
                for level, when in s.reached.items()
            },
            "mode": self.plan.mode,
            "envs": self.plan.total_envs,
            "device": str(self.plan.device),
            "torch_threads": torch.get_num_threads(),
            # how long idle OpenMP threads spin (atari_speed/core/openmp.py): it moves FPS
            "gomp_spincount": os.environ.get("GOMP_SPINCOUNT"),
            "algorithm": preset.dqn.algorithm,
            "precision": "bf16" if self.plan.bf16 else "fp32",
            "update_to_data": self.update_to_data(),
            "choices": record.choices,
            "resumed_at_steps": record.resumed_at,
            "preset": preset.to_dict(),
            "pipeline": self.plan.pipeline,
        }

    def update_to_data(self) -> dict[str, Any]:
        """Gradient samples per agent step: DQN's batch per train_every steps; PQN's epochs
        over every transition of a rollout."""
        return update_schedule(self.plan.preset, self.plan.total_envs).update_to_data()

    def fps_after_warmup(self) -> float | None:
        """Agent steps per second since the first SGD update: the training speed proper."""
        if self.record.learning_from is None:
            return None
        start_seconds, start_frames = self.record.learning_from
        seconds = self.seconds - start_seconds
        return round((self.frames - start_frames) / seconds, 1) if seconds > 0 else None

    def write_summary(self) -> None:
        if self.held:  # the directory's summary.json stays as it is until the run plays
            return
        text = json.dumps(self.summary(), indent=2, default=str)
        write_text_atomic(self.run_dir / "summary.json", text)

    def stats(self) -> dict[str, Any]:
        """What a checkpoint carries to resume the statistics: the record, whole (its wall
        time brought up to now), and how far scores.csv went, for a resume in this
        directory (``drop_logs_after``)."""
        record = dataclasses.replace(
            self.record, seconds_before=self.seconds, cpu_seconds_before=self.cpu_seconds
        )
        if self._cut is not None:  # held: the file still runs past the checkpoint resumed
            scores_bytes = self._cut[0]
        else:
            path = self.scores_path
            scores_bytes = path.stat().st_size if path.is_file() else 0
        return {"record": dataclasses.asdict(record), "scores_bytes": scores_bytes}

    @property
    def scores_path(self) -> Path:
        return self.run_dir / "scores.csv"

    def restore(self, stats: dict[str, Any], frames: int, *, own_logs: bool = False) -> None:
        """Continue a checkpoint's record and frame count. ``own_logs``: this run directory
        is the checkpoint's own, whose logs may run past the checkpoint (a run killed after
        it): what they hold after it is dropped (``drop_logs_after``) once the resumed run
        has played its first frame. Until then the run writes nothing there (``held``)."""
        stop_reward = self.plan.preset.run.stop_reward
        if "record" in stats:
            record = Record.from_dict(stats["record"])
        else:
            record = Record.from_old_stats(stats, stop_reward)
        record.restop(stop_reward)  # a --set given with --resume may change it
        # this run's choices (a loop's threads, a --set's) over the first start's (auto's)
        record.choices = {**record.choices, **self.record.choices}
        record.resumed_at = [*record.resumed_at, frames]
        self.record = record
        self.frames = frames
        self._window = (time.perf_counter(), frames)
        self.bar.reset(total=self.plan.preset.run.steps)
        self.bar.update(frames)
        self.held = True
        self._cut = (stats.get("scores_bytes"), frames) if own_logs else None

    def drop_logs_after(self, scores_bytes: int | None, frames: int) -> None:
        """Forget what this directory's logs say of the frames after a checkpoint at
        ``frames``, as the resumed run plays those frames again; otherwise its curves would
        run twice over them. scores.csv is cut back to its ``scores_bytes`` at the
        checkpoint (None: a checkpoint from before that was saved, whose file is left as
        it is), and to whole rows; TensorBoard is told to hide this directory's scalars
        past ``frames`` (SummaryWriter's purge_step: those at ``frames`` were logged before
        the checkpoint)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._purge_step = frames + 1
        path = self.scores_path
        if scores_bytes is None or not path.is_file():
            return
        with open(path, "r+b") as log:
            text = log.read()
            # whole rows only: a row cut mid-write by a kill or a power cut goes too
            keep = text.rfind(b"\n", 0, min(scores_bytes, len(text))) + 1
            if keep == len(text):
                return
            log.truncate(keep)
        # rows, less the header where none was written by the checkpoint
        rows = text[keep:].count(b"\n") + (not text.endswith(b"\n")) - (keep == 0)
        lost = (
            f"; it was {scores_bytes - len(text):,} bytes shorter than at the checkpoint"
            if len(text) < scores_bytes
            else ""
        )
        print(
            f"--resume: {path}: the last {rows:,} rows dropped (games logged after the "
            f"checkpoint at {frames:,} agent steps, or a row cut mid-write){lost}; those steps "
            "are played again",
            flush=True,
        )

    def close(self) -> None:
        """Write summary.json and close the bar and TensorBoard, each even if one before it
        fails (a full disk); the first error is raised after."""
        first: Exception | None = None
        steps = [self.write_summary, self.bar.close]
        if self._writer is not None:
            steps.append(self._writer.close)
        for step in steps:
            try:
                step()
            except Exception as err:
                first = first or err
        if first is not None:
            raise first


def solves_greedy(evaluation: dict[str, Any], stop_reward: float) -> bool:
    """Whether an evaluation (an entry of ``Record.evaluations``) is the greedy agent's
    solve: its mean reached ``stop_reward`` during the run. A final one comes after the
    run's end, and a cut-short one's mean is only the most it could have been."""
    final, cut = evaluation.get("final"), evaluation.get("at_most")
    return evaluation["reward"] >= stop_reward and not (final or cut)


def summary_steps(data: dict[str, Any], key: str = "steps") -> Any:
    """``data[key]`` of a summary.json, or of one of its evaluations or reached levels,
    under its name before agent steps were called steps (``steps`` was ``frames``,
    ``solved_at_steps`` was ``solved_at_frames``, ...) where the new one is absent: the
    runs/ of earlier versions are still reported. None if neither is there."""
    if key in data:
        return data[key]
    return data.get(key.replace("steps", "frames"))


def _clock(seconds: float) -> str:
    """``1h02m03s``, ``2m03s`` or ``3s``."""
    s = round(seconds)
    h, m = s // 3600, s // 60 % 60
    if h:
        return f"{h}h{m:02d}m{s % 60:02d}s"
    return f"{m}m{s % 60:02d}s" if m else f"{s}s"
