"""A run in progress: what every mode's loop shares.

``Run`` builds the learner, tracker and RNG from a plan, resumes from a checkpoint, makes
the updates the schedule says are due, and does the periodic chores (logs, checkpoints,
evaluation) that every loop calls once per iteration.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from atari_speed.agent.actor import Actor, Game, Sink
from atari_speed.agent.averaging import WeightAverage, plays_average
from atari_speed.agent.learner import Replay
from atari_speed.agent.learning import Learning, make_learner
from atari_speed.agent.networks import build_network
from atari_speed.agent.replay import FrameReplay
from atari_speed.agent.rollout import RolloutStore
from atari_speed.agent.schedules import (
    UpdateSchedule,
    adam_eps,
    env_epsilons,
    epsilon_at,
    follows_greedy,
    lr_factor,
    q_lambda,
    schedule_score,
    update_share,
)
from atari_speed.core.errors import ConfigError
from atari_speed.core.timing import Profiler
from atari_speed.envs.pipeline import resolve_game
from atari_speed.envs.vector import VectorEnv, make_vector_env
from atari_speed.run.checkpoint import (
    Checkpoint,
    load_checkpoint,
    remove_stale_temps,
    save_checkpoint,
)
from atari_speed.run.evaluation import (
    Cutoff,
    Evaluation,
    KeptEnvs,
    eval_cpu_allows,
    evaluating,
    from_reward_reached,
)
from atari_speed.run.lock import RunDirLock
from atari_speed.run.plan import Plan
from atari_speed.run.replay_file import REPLAY_FILE, load_replay, save_replay
from atari_speed.run.tracking import Tracker


class Run:
    """The plan, learner, tracker and RNG of one run, and what the loops do with them."""

    def __init__(self, plan: Plan, run_dir: Path, resume: str | None = None) -> None:
        preset = plan.preset
        self.plan, self.preset, self.run_dir = plan, preset, run_dir
        # Read first: a checkpoint that cannot be resumed is refused before anything is made.
        checkpoint = load_checkpoint(resume) if resume else None
        cuda = plan.device.type == "cuda"
        # This process's stages (--profile); other processes' reports go in ``profiles``.
        self.prof = Profiler(preset.run.profile, sync=torch.cuda.synchronize if cuda else None)
        self.profiles: dict[str, dict[str, Any]] = {}
        torch.manual_seed(preset.run.seed)
        net = build_network(preset.dqn, plan.obs_shape, plan.actions)
        self.learner: Learning = make_learner(
            preset, net, plan.device, bf16=plan.bf16, prof=self.prof, act_bf16=plan.act_bf16
        )
        self.schedule = UpdateSchedule.of(preset)  # DQN's: what the replay loops ask
        self.rng = np.random.default_rng(preset.run.seed)
        run_dir.mkdir(parents=True, exist_ok=True)
        # Before anything is written there: a second trainer on this directory is refused.
        self.lock = RunDirLock(run_dir).acquire()
        try:
            self.tracker = Tracker(plan, run_dir)
            self.resumed_from = Path(resume) if resume else None
            # The replay saved beside the checkpoint resumed (DQN), and what was restored.
            self.saved_replay = (
                self.resumed_from.parent / REPLAY_FILE if self.resumed_from else None
            )
            self.restored = 0  # transitions restored into this run's replay
            self.replay: FrameReplay | None = None  # kept on the way out (see keep_replay)
            # n-env mode's actor, whose envs' phases checkpoints keep (``start_actor``),
            # and those of the checkpoint resumed
            self.actor: Actor | None = None
            self.saved_phases: list[int] | None = None
            if checkpoint is not None:
                self.resume(checkpoint)
            self.average = self.start_average(checkpoint)
            # pqn.learn_while_held: the agent that plays the training games, and its
            # evaluation's mean, once one has been held
            self.held_net: torch.nn.Module | None = None
            self.held_score: float | None = None
            if checkpoint is not None and checkpoint.held is not None:
                self.hold_actor(checkpoint.held["weights"], float(checkpoint.held["score"]))
        except BaseException:
            self.lock.release()
            raise
        self.updates_before = self.learner.updates
        self.next_log = self.frames
        self.next_checkpoint = self.frames + preset.run.checkpoint_every
        self.next_eval = self.frames + preset.eval.every
        self.next_replay_save = self.frames + preset.run.replay_save_every
        self.evaluation: Evaluation | None = None
        self.eval_envs = KeptEnvs()  # every-start evaluations' envs, made once
        # best.pt's weights by smoothed score, and their agent step, not yet written
        self.best_pending: tuple[dict[str, torch.Tensor], int] | None = None

    def vector_env(self) -> VectorEnv:
        """The plan's envs (``run.envs`` of them) on its backend, timed under --profile."""
        preset = self.preset
        return make_vector_env(
            self.plan.pipeline,
            preset.env.game,
            preset.run.envs,
            backend=preset.env.backend,
            profile=self.prof.enabled,
        )

    @property
    def frames(self) -> int:
        """Agent steps so far, all envs, earlier runs resumed included."""
        return self.tracker.frames

    def decay_progress(self) -> float:
        """How far PQN's learning rate has decayed (0..1): it is its start times (1 - this),
        the schedules of ``lr_factor`` (agent steps, and the smoothed training score)."""
        return 1.0 - lr_factor(self.preset, self.frames, self.schedule_score())

    def schedule_score(self) -> float | None:
        """The score the schedules that fall with the score follow (``schedule_score``):
        PQN's learning rate and updates, epsilon's fall and acting with the average."""
        smoothed, greedy = self.tracker.scores.smoothed, self.tracker.record.eval_reward
        if self.held_score is not None:  # held, whatever later evaluations played
            greedy = self.held_score
        return schedule_score(self.preset, smoothed, greedy)

    @property
    def holds_greedy(self) -> bool:
        """``pqn.hold_at_greedy``: the last greedy evaluation played run.stop_reward (by
        ``pqn.follow_margin``), so the learner holds the weights it played (no SGD update,
        no further evaluation); with ``pqn.learn_while_held`` only the actor holds them.
        PQN only: DQN's loops count the updates due per agent step and would pile them up."""
        greedy, pqn = self.tracker.record.eval_reward, self.preset.pqn
        return (
            self.preset.dqn.algorithm == "pqn"
            and pqn.hold_at_greedy
            and not pqn.learn_while_held
            and follows_greedy(self.preset, greedy)
        )

    @property
    def learning_rate(self) -> float:
        """The learner's rate now: PQN's follows ``lr_factor`` (0 while ``holds_greedy``); DQN's
        stays at its start."""
        if self.holds_greedy:
            return 0.0
        rate = self.preset.dqn.learning_rate
        return rate * (1.0 - self.decay_progress()) if self.preset.dqn.algorithm == "pqn" else rate

    @property
    def epsilon(self) -> float:
        return epsilon_at(
            self.preset.explore, self.frames, self.schedule_score(), self.preset.run.stop_reward
        )

    def env_epsilons(self, envs: int) -> float | np.ndarray:
        """What ``envs`` envs act at: the run's epsilon, spread over them by
        ``explore.env_spread``."""
        return env_epsilons(self.preset.explore, self.epsilon, self.frames, envs)

    @property
    def done(self) -> bool:
        run = self.preset.run
        out_of_time = run.seconds > 0 and self.tracker.seconds >= run.seconds
        solved = self.tracker.scores.solved_at is not None
        return self.frames >= run.steps or solved or out_of_time

    # ------------------------------------------------------------ learning

    def updates_due(self, collected: int) -> int:
        """Updates still due once ``collected`` more transitions are in this run's replay
        (beside those restored)."""
        made = self.learner.updates - self.updates_before
        return self.schedule.due(self.restored + collected) - made

    # ------------------------------------------------------------ the replay

    def new_replay(self, columns: int) -> FrameReplay:
        """An empty in-process replay with one column per env, sized by the preset."""
        preset, plan = self.preset, self.plan
        return FrameReplay(
            preset.replay.size,
            columns,
            plan.frame_shape,
            plan.stack,
            preset.dqn.n_steps,
            preset.dqn.gamma,
        )

    @contextmanager
    def keep_replay(self, replay: FrameReplay) -> Iterator[None]:
        """Restore ``replay`` from the resumed run's replay.npz, and on the way out of the
        block, however it is left, write checkpoint.pt and then the replay beside it (an
        error in flight is not hidden by a failed save)."""
        self.restore_replay(replay)
        self.replay = replay
        try:
            yield
        except BaseException:
            # The checkpoint first: a replay takes seconds to write, and a SIGKILL after a
            # SIGTERM's grace, or the last space on the disk, must not cost the checkpoint.
            with contextlib.suppress(Exception, KeyboardInterrupt):
                self.checkpoint()
                self.save_replay()
            raise
        else:
            self.checkpoint()
            self.save_replay()
        finally:
            self.replay = None

    def restore_replay(self, replay: FrameReplay) -> None:
        """Fill ``replay`` from the resumed checkpoint's replay.npz, if it has one that
        fits; otherwise say in one line that it refills. Updates go on from where the
        restored transitions put the schedule: at once, with no warm-up."""
        if self.saved_replay is None:
            return
        started = time.perf_counter()
        try:
            saved_at = load_replay(self.saved_replay, replay)
        except ConfigError as err:
            print(f"--resume: {err}; refilling {self.preset.replay.initial:,} transitions first")
            return
        self.restored = len(replay)
        self.updates_before = self.learner.updates - self.schedule.due(self.restored)
        when = "" if saved_at == self.frames else f", saved at agent step {saved_at:,}"
        print(
            f"--resume: {self.restored:,} transitions restored from {self.saved_replay} in "
            f"{time.perf_counter() - started:.1f} s{when}"
        )
        self.tracker.note_choices(replay_restored=self.restored)

    def start_actor(self, actor: Actor) -> None:
        """n-env mode's actor, whose envs' phases the checkpoints keep from now on; after
        --resume its envs, all just reset, are first brought back to the checkpoint's
        phases (``run.resume_phases``), or else play apart (``resume_spread``)."""
        limit, phases = self.preset.run.resume_phases, self.saved_phases
        if self.done:  # nothing will be played: checkpoints keep the phases resumed
            return
        # the envs are brought back, or spread, with the network the run then acted with
        self.choose_acting(actor)
        # The actor's phases go into checkpoints only once its envs are where they should
        # be: a checkpoint written on the way out of a realignment keeps the resumed ones.
        if self.resumed_from is None or not limit or phases is None:
            self.spread_after_resume(actor)
        elif len(phases) != actor.num_envs:
            print(
                f"--resume: the checkpoint's {len(phases)} envs are not this run's "
                f"{actor.num_envs}; its phases are not restored (run.resume_phases)"
            )
            self.spread_after_resume(actor)
        else:
            started, phases = time.perf_counter(), np.minimum(np.asarray(phases), limit)
            print(
                f"--resume: bringing each of {len(phases)} envs back to the point of a game "
                f"it was at: {phases.max():,} steps of each env (run.resume_phases)",
                flush=True,
            )
            with tqdm(total=int(phases.max()), unit="step", disable=None, leave=False) as bar:
                actor.realign(phases, self.epsilon, on_step=bar.update)
            print(
                f"--resume: each env brought back to the point of a game it was at "
                f"({phases.min():,} to {phases.max():,} agent steps in, the games then in "
                "progress not scored; "
                f"{time.perf_counter() - started:.0f} s of the run's clock, untrained and "
                "uncounted; run.resume_phases)"
            )
        self.actor = actor

    def env_phases(self) -> list[int] | None:
        """Each env's agent steps into its game, for a checkpoint: the actor's once it has
        started (``start_actor``), else those of the checkpoint resumed (or None)."""
        return self.actor.phases.tolist() if self.actor is not None else self.saved_phases

    def spread_after_resume(self, actor: Actor | None = None) -> None:
        """After --resume, the envs, all just reset, first play apart (``run.resume_spread``):
        ``actor``'s here, or (None) parallel mode's actors', each once its first weights are
        in (``ActorProcess.refresh_weights``); said in one line."""
        most = self.preset.run.resume_spread
        if self.resumed_from is None or most <= 0 or self.done:
            return
        if actor is not None:
            actor.spread(most, self.epsilon)
        print(
            f"--resume: each env first plays 0 to {most} random actions, untrained and "
            "unscored, so that the restarted envs play distinct games (run.resume_spread)"
        )

    def save_replay(self) -> None:
        """Write the replay to replay.npz (if run.replay_save), atomically."""
        if self.replay is None or not self.preset.run.replay_save:
            return
        with self.prof.section("replay save"):
            save_replay(self.replay, self.run_dir / REPLAY_FILE, self.frames)

    def learn(self, source: Replay | RolloutStore) -> None:
        """Learn from what the actors filled: one SGD update on a batch sampled from DQN's
        replay, or PQN's epochs over a full rollout (``Learning.learn``)."""
        if not self.holds_greedy:
            score = self.schedule_score()
            share = update_share(self.preset, self.frames, score)
            eps = adam_eps(self.preset, score)
            lam = q_lambda(self.preset, score)
            self.learner.learn(source, self.decay_progress(), self.rng, share, eps, lam)
            if self.average is not None:
                self.average.update(self.learner.net, self.frames)
        self.choose_acting()

    def new_actor(self, venv: VectorEnv, sink: Sink) -> Actor:
        """n-env mode's one actor: every env of ``venv`` into ``sink``, with the learner's
        network, the run's seed and RNG (one stream, saved in checkpoints)."""
        plan = self.plan
        return Actor(
            venv,
            self.learner.net,
            sink,
            slice(None),
            self.preset.run.seed,
            self.rng,
            plan.device,
            self.prof,
            bf16=plan.act_bf16,
        )

    def choose_acting(self, actor: Actor | None = None) -> None:
        """n-env mode's actor (``actor``, else the one started) plays with the weights'
        average while the smoothed score (``schedule_score``) is at or above
        pqn.act_average_from (``pqn.act_with_average``), else with the weights as they
        are; with ``pqn.learn_while_held``, once an agent is held, with its weights."""
        pqn, score = self.preset.pqn, self.schedule_score()
        actor = actor or self.actor
        if actor is not None and self.held_net is not None:
            actor.act_with(self.held_net)
            return
        if actor is None or self.average is None or not pqn.act_with_average:
            return
        average = score is not None and score >= pqn.act_average_from
        actor.act_with(self.average.net if average else None)

    def start_average(self, checkpoint: Checkpoint | None) -> WeightAverage | None:
        """The average of the weights that evaluations play from eval.average_from
        (``eval.average_steps``), or None; a resumed run goes on with the checkpoint's
        average where it has one."""
        steps = self.preset.eval.average_steps
        if not steps:
            return None
        average = WeightAverage(self.learner.net, steps, self.frames)
        if checkpoint is None:
            return average
        if checkpoint.average is None:
            print(
                "--resume: the checkpoint holds no average of the weights "
                "(eval.average_steps); it starts from the resumed weights"
            )
        else:
            try:
                average.load_state_dict(checkpoint.average)
            except (ValueError, KeyError, TypeError) as err:
                raise ConfigError(f"--resume: {self.resumed_from}: {err}") from None
        return average

    # ------------------------------------------------------------ bookkeeping

    def game(self, game: Game) -> None:
        """Record a finished game; best.pt follows the smoothed score until evaluations
        score the weights (never, when they are off). The weights of a new best are kept
        here and written with the next checkpoint.pt and on the way out (``write_best``):
        a rising score makes a new best every few games, and a write each time was a
        large part of a run's chores (docs/roofline.md)."""
        if self.tracker.game(game) and self.tracker.best_eval is None:
            weights = {k: v.detach().clone() for k, v in self.learner.net.state_dict().items()}
            self.best_pending = (weights, self.frames)

    def write_best(self) -> None:
        """Write the best weights by smoothed score kept since the last write, if any."""
        if self.best_pending is not None:
            weights, frames = self.best_pending
            self.checkpoint("best.pt", weights_only=True, net_state=weights, frames=frames)
            self.best_pending = None

    def periodic(self, buffer_fill: float) -> None:
        """Logs, checkpoints and evaluation, each when its interval of agent steps has passed."""
        run = self.preset.run
        if self.learner.updates > self.updates_before:
            self.tracker.learning_started()
        if self.frames >= self.next_log:
            self.next_log = self.frames + run.log_every
            self.tracker.log(self.epsilon, self.learner.pop_loss(), buffer_fill)
            eps = adam_eps(self.preset, self.schedule_score())
            self.tracker.log_pace(self.learning_rate, self.learner.updates, eps)
            if self.prof.enabled:
                self.tracker.log_profile("", self.prof.report())
        if self.frames >= self.next_checkpoint:
            self.next_checkpoint = self.frames + run.checkpoint_every
            self.write_best()
            self.checkpoint()
        # n-env only: in parallel mode actors write while a copy would be read.
        if (
            run.replay_save_every
            and self.plan.mode == "n-env"
            and self.frames >= self.next_replay_save
        ):
            self.next_replay_save = self.frames + run.replay_save_every
            self.save_replay()
        self._evaluate()

    def _evaluate(self) -> None:
        ev = self.preset.eval
        if (
            evaluating(ev, self.tracker.scores.best_smoothed)
            and not self.holds_greedy
            and self.frames >= self.next_eval
            and self.evaluation is None
            and eval_cpu_allows(
                self.tracker.record.evaluations, ev.max_cpu_share, self.tracker.cpu_seconds
            )
        ):
            self.next_eval = self.frames + ev.every
            self._start_evaluation()
        if self.evaluation is not None and self.evaluation.finished():
            self._record_evaluation()

    def evaluates_average(self) -> bool:
        """Whether an evaluation now plays the weights' average (``eval.average_steps``)
        rather than the weights as they are: from a smoothed training score of
        ``eval.average_from`` on."""
        if self.average is None:
            return False
        return plays_average(self.preset.eval.average_from, self.tracker.scores.smoothed)

    def cutoff(self, final: bool = False) -> Cutoff | None:
        """When an evaluation now stops early (``eval.max_game_score``): until one has
        reached run.stop_reward, and not the final one, whose score best.pt needs."""
        ev, stop = self.preset.eval, self.preset.run.stop_reward
        if not ev.max_game_score or final or self.tracker.record.eval_solved_at is not None:
            return None
        return Cutoff(stop, ev.max_game_score)

    def _start_evaluation(self, final: bool = False) -> None:
        average = self.evaluates_average()
        assert self.average is not None or not average
        weights = self.average.weights if average else self.learner.net.state_dict()
        if self.preset.eval.snapshots:
            (self.run_dir / "snapshots").mkdir(exist_ok=True)
            remove_stale_temps(self.run_dir / "snapshots" / "*.pt")
            self.checkpoint(f"snapshots/{self.frames}.pt", weights_only=True)
            if self.average is not None:
                self.checkpoint(
                    f"snapshots/{self.frames}-average.pt",
                    weights_only=True,
                    net_state=self.average.weights,
                )
        self.evaluation = Evaluation(
            self.plan,
            weights,
            self.frames,
            self.tracker.seconds,
            self.tracker.cpu_seconds,
            average=average,
            kept=self.eval_envs,
            cutoff=self.cutoff(final),
        )

    def end_evaluations(self) -> None:
        """Stop the evaluation in progress, if any, and close the envs evaluations kept,
        unless its thread outlived the wait (its games would step closed emulators; the
        process's exit reclaims them)."""
        if self.evaluation is not None:
            self.evaluation.cancel()
            if not self.evaluation.finished():
                return
        self.eval_envs.close()

    def _record_evaluation(self, final: bool = False) -> None:
        evaluation, self.evaluation = self.evaluation, None
        assert evaluation is not None
        if evaluation.at_most is None:  # best.pt follows evaluations from the first scored
            self.best_pending = None
        best = self.tracker.evaluated(
            evaluation.result(),
            evaluation.frames,
            evaluation.seconds,
            evaluation.cpu_seconds,
            evaluation.scores,
            evaluation.run_cpu_seconds,
            final=final,
            average=evaluation.average,
            at_most=evaluation.at_most is not None,
        )
        if best:
            self.checkpoint("best.pt", weights_only=True, net_state=evaluation.net_state)
        self._go_on_from_average(evaluation, final)

    def _go_on_from_average(self, evaluation: Evaluation, final: bool) -> None:
        """``pqn.follow_greedy``: an average of the weights whose greedy evaluation reached
        run.stop_reward (by ``pqn.follow_margin``) becomes the learner's weights. The
        weights as they are wobble from update to update around their average, and play
        worse than it; learning on from them at the rate for a solved agent would bring
        the average down to them. With ``pqn.hold_at_greedy`` the evaluated weights, the
        average's or not, become the average too: the agent held is the one evaluated.
        With ``pqn.learn_while_held`` they become the actor's alone (``hold_actor``), where
        they score above the agent held so far."""
        pqn = self.preset.pqn
        score = evaluation.result()
        if final or not follows_greedy(self.preset, score):
            return
        frozen = pqn.hold_at_greedy and not pqn.learn_while_held
        if frozen or evaluation.average:
            self.learner.net.load_state_dict(evaluation.net_state)
        if frozen and self.average is not None:
            # in place: the average's weights are its network's tensors
            self.average.net.load_state_dict(evaluation.net_state)
        begins = frozen or (pqn.hold_at_greedy and self.held_score is None)
        better = self.held_score is None or score > self.held_score
        if pqn.hold_at_greedy and pqn.learn_while_held and better:
            self.hold_actor(evaluation.net_state, score)
            self.tracker.say(
                f"agent step {self.frames:,}: the training games are played by the agent "
                f"this greedy evaluation scored ({score:.2f}); learning goes on "
                "(pqn.learn_while_held)"
            )
        if begins and pqn.new_games_at_hold and self.actor is not None:
            self.actor.new_games()
            self.tracker.say(
                f"agent step {self.frames:,}: the greedy agent is held; every env starts a "
                "new game, the games in progress not scored (pqn.new_games_at_hold)"
            )

    def hold_actor(self, weights: dict[str, torch.Tensor], score: float) -> None:
        """``pqn.learn_while_held``: the training games are played from the next step by
        ``weights``, which a greedy evaluation scored ``score``; the learner goes on."""
        if self.held_net is None:
            # the learner's architecture and memory format, tensors of its own
            self.held_net = copy.deepcopy(self.learner.net).eval().requires_grad_(False)
        self.held_net.load_state_dict(weights)
        self.held_score = score
        self.choose_acting()

    def final_evaluation(self) -> None:
        """``eval.at_end``: once the loop has ended by itself, the evaluation in progress
        is waited for and recorded, then the final weights are evaluated, unless that one
        was of them; best.pt follows as ever. With or without evaluations during the run
        (``eval.every``), once the smoothed score has reached ``eval.from_reward``. Ctrl-C
        or SIGTERM while it plays ends the run as they always do (``finish`` cancels the
        games)."""
        ev = self.preset.eval
        if not (ev.at_end and from_reward_reached(ev, self.tracker.scores.best_smoothed)):
            return
        self.tracker.stop_clocks()
        if self.tracker.held:  # resumed after the run's end: nothing played, yet this counts
            self.tracker.go_on()
        if self.evaluation is not None:
            self.evaluation.wait()
            self._record_evaluation()
        evaluations = self.tracker.record.evaluations
        if evaluations and evaluations[-1]["steps"] == self.frames:
            return
        self._start_evaluation(final=True)
        assert self.evaluation is not None
        games = f"{ev.episodes} game{'s' * (ev.episodes != 1)}"
        if ev.every_start:
            games = "a game from every start"
        weights = "the weights' average" if self.evaluation.average else "the weights"
        self.tracker.say(f"final evaluation: {games} of {weights} at agent step {self.frames:,}")
        self.evaluation.wait()
        self._record_evaluation(final=True)
        final = self.tracker.record.evaluations[-1]
        if final["games"]:
            self.tracker.say(
                f"final evaluation: mean {final['reward']:+.1f} over {len(final['games'])} "
                + ("starts, weighted as drawn" if ev.every_start else "games")
            )

    # ------------------------------------------------------------ checkpoints

    def checkpoint(
        self,
        name: str = "checkpoint.pt",
        weights_only: bool = False,
        net_state: dict[str, Any] | None = None,
        frames: int | None = None,
    ) -> None:
        plan, resumable = self.plan, not weights_only
        checkpoint = Checkpoint(
            game=plan.game,
            pipeline=plan.pipeline,
            preset=self.preset.to_dict(),
            obs_shape=list(plan.obs_shape),
            actions=plan.actions,
            dueling=self.preset.dqn.dueling,
            network=self.preset.dqn.network,
            layer_norm=self.preset.dqn.layer_norm,
            quantiles=self.preset.dqn.quantiles,
            frames=self.frames if frames is None else frames,
            net=net_state if net_state is not None else self.learner.net.state_dict(),
            learner=self.learner.state_dict() if resumable else None,
            stats=self.tracker.stats() if resumable else None,
            rng={"numpy": self.rng.bit_generator.state, "torch": torch.get_rng_state()}
            if resumable
            else None,
            average=self.average.state_dict() if resumable and self.average is not None else None,
            held=self.held_state() if resumable else None,
            env_phases=self.env_phases() if resumable else None,
        )
        save_checkpoint(checkpoint, self.run_dir / name)

    def held_state(self) -> dict[str, Any] | None:
        """The agent ``pqn.learn_while_held`` holds, and its score, for a checkpoint."""
        if self.held_net is None or self.held_score is None:
            return None
        return {"weights": self.held_net.state_dict(), "score": self.held_score}

    def resume(self, checkpoint: Checkpoint) -> None:
        """Continue ``checkpoint``'s run, or raise ConfigError saying why it cannot be."""
        plan, dqn = self.plan, self.preset.dqn
        game = resolve_game(checkpoint.game)  # older checkpoints: the name as given
        if game != plan.game or checkpoint.actions != plan.actions:
            raise ConfigError(
                f"--resume: the checkpoint is of {checkpoint.game} ({checkpoint.actions} "
                f"actions), this run is {self.preset.env.game} ({plan.actions} actions)"
            )
        ours = {
            "observations": list(plan.obs_shape),
            "network": dqn.network,
            "dueling": dqn.dueling,
            "quantiles": dqn.quantiles,
        }
        theirs = {
            "observations": list(checkpoint.obs_shape),
            "network": checkpoint.network,
            "dueling": checkpoint.dueling,
            "quantiles": checkpoint.quantiles,
        }
        if ours != theirs:
            raise ConfigError(
                f"--resume: the checkpoint's network does not fit this preset's: it has "
                f"{theirs}, this run {ours}; resume with the preset that trained it"
            )
        if not checkpoint.resumable:
            raise ConfigError(
                "--resume: this checkpoint holds weights only (a best.pt?); "
                "resume from checkpoint.pt"
            )
        self.learner.load_state_dict(checkpoint.learner)
        # Resumed in its own directory, the run's logs go on where the checkpoint left them.
        own_logs = self.resumed_from is not None and (
            self.resumed_from.parent.resolve() == self.run_dir.resolve()
        )
        self.tracker.restore(checkpoint.stats, int(checkpoint.frames), own_logs=own_logs)
        self.rng.bit_generator.state = checkpoint.rng["numpy"]
        torch.set_rng_state(checkpoint.rng["torch"])
        self.saved_phases = checkpoint.env_phases
