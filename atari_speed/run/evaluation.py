"""Evaluation beside training: a snapshot of the network plays whole games in a thread.

The games are played side by side, one env each, with one batched forward pass a step:
on a CPU a pass over 10 observations costs about what one costs, so the evaluation's
cost is mostly the emulators' steps.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import threading
import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from atari_speed.agent.networks import build_network
from atari_speed.agent.policy import act
from atari_speed.core.config import EvalConfig
from atari_speed.envs.pipeline import MAX_EPISODE_FRAMES, make_env
from atari_speed.envs.wrappers import NEW_GAME, NOOPS, emulator_sticky, noop_stage
from atari_speed.run.plan import Plan

# An evaluation's forward passes are of a few observations; a team of torch's threads of
# its own would spin beside training's on the same cores, CPU that its thread's time leaves
# out. So it plays on one, where torch's thread count is the calling thread's own (OpenMP's);
# with another backend it is the process's, and training's would fall to one too. Even
# with OpenMP the call also sets the count a thread that has not yet run torch's parallel
# work starts with: training's main thread has run it by the first evaluation (the
# network is built before), and no other thread of a run does torch's work.
PER_THREAD_THREADS = "parallel backend: OpenMP" in torch.__config__.parallel_info()


def evaluating(ev: EvalConfig, best_smoothed: float | None) -> bool:
    """Whether evaluations are on by now: ``eval.every`` set, and the best smoothed
    training score so far at ``eval.from_reward`` (``from_reward_reached``)."""
    return bool(ev.every) and from_reward_reached(ev, best_smoothed)


def from_reward_reached(ev: EvalConfig, best_smoothed: float | None) -> bool:
    """Whether the best smoothed training score so far has reached ``eval.from_reward``
    (-1000: from the start)."""
    return ev.from_reward <= -1000 or (
        best_smoothed is not None and best_smoothed >= ev.from_reward
    )


def eval_cpu_allows(evaluations: list[dict[str, Any]], share: float, run_cpu: float) -> bool:
    """Whether the next evaluation fits ``share`` (``eval.max_cpu_share``) of the run's
    CPU: the evaluations' games' CPU so far, and the next one's at the last one's cost,
    within ``share`` of the run's CPU time (``run_cpu``, now) since the first began. The
    first waits for nothing; it is where the share is counted from."""
    timed = during_run(evaluations)
    if share >= 1.0 or not timed:
        return True
    spent = sum(e["cpu_seconds"] for e in timed)
    return spent + timed[-1]["cpu_seconds"] <= share * (run_cpu - timed[0]["run_cpu_seconds"])


def eval_cpu_share(evaluations: list[dict[str, Any]], run_cpu: float) -> float | None:
    """The evaluations' games' CPU over the run's CPU time (``run_cpu``, now) from the
    first evaluation on; None before there is one that recorded when it began. A final
    one (``eval.at_end``), played once the run's clocks had stopped, is left out."""
    timed = during_run(evaluations)
    if not timed or run_cpu <= timed[0]["run_cpu_seconds"]:
        return None
    spent = sum(e["cpu_seconds"] for e in timed)
    return round(spent / (run_cpu - timed[0]["run_cpu_seconds"]), 4)


def during_run(evaluations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The evaluations played during the run that recorded when they began: not a
    final one (``eval.at_end``), which the run's CPU does not include."""
    return [e for e in evaluations if e.get("run_cpu_seconds") is not None and not e.get("final")]


def evaluation_seed(run_seed: int, steps: int) -> int:
    """The seed of an evaluation of the weights at agent step ``steps``: its env i is
    seeded with it + i and its random numbers with it, apart from training's and
    different at each evaluation."""
    return run_seed + 10_000 + steps


def evaluation_envs(
    pipeline: dict[str, Any], game: str, episodes: int, seed: int | None, max_frames: int = 0
) -> list[gym.Env]:
    """An evaluation's ``episodes`` envs, env i seeded with ``seed + i`` (None: not seeded,
    nor reset); ``max_frames`` (``eval.max_frames``): a game's most emulator frames, 0 =
    the emulator's."""
    return [
        make_env(
            pipeline, game, seed=None if seed is None else seed + i, max_frames=max_frames or None
        )
        for i in range(episodes)
    ]


def new_game(env: gym.Env, options: dict[str, Any] | None = None) -> np.ndarray:
    """Reset ``env`` to a new game, started as ``options`` say (``wrappers.NOOPS``), and
    return its first observation. A new game, even right after another reset: EpisodicLife
    otherwise takes a reset of a game that is not over (as a seeded env's, made and reset
    once) for one after a lost life, and goes on with that game, options unread."""
    return np.asarray(env.reset(options={**(options or {}), NEW_GAME: True})[0])


def play_side_by_side(
    envs: list[gym.Env],
    net: torch.nn.Module,
    device: torch.device,
    epsilon: float,
    rng: np.random.Generator,
    stop: threading.Event | None = None,
    options: Sequence[dict[str, Any] | None] | None = None,
    cutoff: Cutoff | None = None,
    weights: Sequence[float] | None = None,
) -> list[float]:
    """One whole game on each env, all stepped together; each game's unclipped score, in
    the order the envs are given. ``stop`` ends play early, with only the games finished;
    ``options``, one per env, start its game (a chosen start: ``wrappers.NOOPS``);
    ``cutoff``: CutShort once the games' mean, weighted ``weights`` (None: equally), can
    no longer reach its target."""
    options = options or [None] * len(envs)
    weights = weights or [1 / len(envs)] * len(envs)
    recorders = [env.recorder for env in envs] if cutoff is not None else []  # type: ignore[attr-defined]
    obs = [new_game(env, o) for env, o in zip(envs, options, strict=True)]
    scores: list[float | None] = [None] * len(envs)
    steps = 0
    while not (stop is not None and stop.is_set()):
        playing = [i for i, score in enumerate(scores) if score is None]
        if not playing:
            break
        batch = np.stack([obs[i] for i in playing])
        actions = act(net, batch, epsilon, envs[0].action_space.n, rng, device)[0]
        # a fall of a game's score: points lost, and the cut's bound falls
        before = [recorders[i].reward for i in playing] if cutoff is not None else []
        for i, action in zip(playing, actions, strict=True):
            obs[i], scores[i] = step_game(envs[i], int(action))
        steps += len(playing)
        # the bound falls where a game lost points, or ended (it counts at its score)
        if cutoff is not None and any(
            scores[i] is not None or recorders[i].reward < r
            for i, r in zip(playing, before, strict=True)
        ):
            most = [
                cutoff.max_score - points_lost(r.scored) if s is None else s
                for r, s in zip(recorders, scores, strict=True)
            ]
            cutoff.check(weights, most, steps)
    return [s for s in scores if s is not None]


def step_game(env: gym.Env, action: int) -> tuple[np.ndarray, float | None]:
    """One agent step of a whole game: the next observation, and the game's unclipped
    score if the step ended it (a lost life does not: the game goes on, EpisodicLife)."""
    step_obs, _, terminated, truncated, info = env.step(action)
    if "episode" in info:
        return np.asarray(step_obs), float(info["episode"]["r"])
    if terminated or truncated:
        step_obs, _ = env.reset()
    return np.asarray(step_obs), None


class CutShort(Exception):
    """An evaluation stopped once its games could no longer reach its ``Cutoff``'s target:
    ``at_most`` is the most its mean could have been."""

    def __init__(self, at_most: float, played: int) -> None:
        super().__init__(f"the mean could be at most {at_most:+.2f}")
        self.at_most, self.played = at_most, played


@dataclasses.dataclass(frozen=True)
class Cutoff:
    """When an evaluation stops early: once its games' lost points leave its mean no way to
    reach ``target``. A game's score is at most ``max_score`` (the most its positive
    rewards can add up to: Pong's 21 points that end it) less the points it has lost so
    far, and that bound only falls as it plays."""

    target: float  # run.stop_reward
    max_score: float  # eval.max_game_score

    def check(self, weights: Sequence[float], most: Sequence[float], played: int) -> None:
        """CutShort where games weighted ``weights`` (summing to 1), each scoring at most
        ``most``, can no longer reach the target; ``played``: agent steps so far."""
        bound = float(np.dot(weights, most))
        if bound < self.target:
            raise CutShort(bound, played)


def points_lost(scored: Sequence[tuple[int, float]], after: int = 0, upto: int = 0) -> float:
    """The points a game lost (its negative rewards, as a positive sum) on its emulator
    frames in (``after``, ``upto``] (0 = to its last), from its recorder's ``scored``: the
    score after each frame that scored."""
    lost, last = 0.0, 0.0
    for frame, score in scored:
        if score < last and frame > after and (not upto or frame <= upto):
            lost += last - score
        last = score
    return lost


@dataclasses.dataclass
class _Game:
    """One game of ``play_merging``: where it stopped and what it scored until then, and
    the game it goes on as, if it met one."""

    end: int = 0  # the emulator frame it stopped at: over, or merged into another
    score: float = 0.0  # its score at ``end``
    scored: list[tuple[int, float]] = dataclasses.field(default_factory=list)
    link: tuple[int, int, float] | None = None  # (the other game, its frame, its score) then


def play_merging(
    envs: list[gym.Env],
    net: torch.nn.Module,
    device: torch.device,
    options: Sequence[dict[str, Any] | None],
    max_frames: int = 0,
    stop: threading.Event | None = None,
    cutoff: Cutoff | None = None,
    weights: Sequence[float] = (),
) -> tuple[list[float], int]:
    """``play_side_by_side`` for a greedy agent without sticky actions, where a game is a
    function of its start: a game that reaches a state (the emulator's RAM and the
    observation) another game was in stops there and goes on as that game did, shifted
    by the frames between them. Starts that differ by a few NOOPs can meet within steps,
    so most games need not be played out.

    The scores are those the games would have had, to the frame: ``max_frames`` (0 = the
    emulator's) ends a game that went on as another one where its own frame count runs
    out, so a game only goes on as one that was in that state at no more frames than its
    own. Fewer envs than starts play the starts in turn, in their order: an env whose game
    stopped starts the next. Returns each start's score (``[]`` when ``stop`` ended play)
    and the agent steps played. ``cutoff``: CutShort once the starts' mean, weighted
    ``weights``, can no longer reach its target (a game's points lost include those of
    the game it goes on as, from where it met it)."""
    recorders = [env.recorder for env in envs]  # type: ignore[attr-defined]
    games = [_Game() for _ in options]
    waiting, env_of = collections.deque(range(len(options))), {}  # game -> its env's index
    obs: dict[int, np.ndarray] = {}
    playing: set[int] = set()
    freed: list[int] = []  # envs whose game stopped in this step
    steps = 0
    seen: dict[bytes, tuple[int, int, float]] = {}  # state -> (game, its frame, its score)

    def start(env: int) -> None:
        if waiting:
            game = waiting.popleft()
            env_of[game] = env
            obs[game] = new_game(envs[env], options[game])
            playing.add(game)

    def leads_to(game: int, other: int) -> bool:
        while game != other and games[game].link is not None:
            game = games[game].link[0]  # type: ignore[index]
        return game == other

    def halt(game: int, frame: int, link: tuple[int, int, float] | None = None) -> None:
        scored = [(f, r) for f, r in recorders[env_of[game]].scored if f <= frame]
        score = scored[-1][1] if scored else 0.0
        games[game] = _Game(frame, score, scored, link)
        playing.discard(game)
        freed.append(env_of[game])

    cap = max_frames or MAX_EPISODE_FRAMES  # a game that goes on as another ends at its own

    def lost(game: int, after: int, upto: int) -> float:
        """The points ``game`` lost on its own frames in (``after``, ``upto``] so far."""
        if game in playing:
            return points_lost(recorders[env_of[game]].scored, after, upto)
        if game not in env_of:  # not started
            return 0.0
        g = games[game]
        own = points_lost(g.scored, after, min(upto, g.end))
        if g.link is None or upto <= g.end:
            return own
        other, at = g.link[:2]
        return own + lost(other, at + max(after - g.end, 0), at + upto - g.end)

    for env in range(min(len(envs), len(options))):
        start(env)
    rng = np.random.default_rng(0)  # epsilon 0: never drawn from
    while playing and not (stop is not None and stop.is_set()):
        order = sorted(playing)
        batch = np.stack([obs[i] for i in order])
        actions = act(net, batch, 0.0, envs[0].action_space.n, rng, device)[0]
        # a fall of a game's score: points lost, and the cut's bound falls
        before = [recorders[env_of[i]].reward for i in order] if cutoff is not None else []
        for i, action in zip(order, actions, strict=True):
            obs[i], over = step_game(envs[env_of[i]], int(action))
            steps += 1
            if over is not None:
                halt(i, recorders[env_of[i]].frames)
        # a game stopped in this loop (it met one at fewer frames) is still where it was:
        # its state goes on being met, as the game it goes on as was there
        for i in sorted(playing):
            recorder = recorders[env_of[i]]
            state = envs[env_of[i]].unwrapped.ale.getRAM().tobytes() + obs[i].tobytes()
            key = hashlib.blake2b(state, digest_size=16).digest()  # a game's states held small
            here = (i, recorder.frames, recorder.reward)
            other, frame, _ = seen.get(key, here)
            # not a new state, nor one of this game's own loop, nor of a game that goes on as
            # this one. A state another game was in after it stopped (it went on as a third)
            # is met all the same: that game's frames past its stop are the third's, shifted
            meets = other != i and not leads_to(other, i)
            if meets and frame <= here[1]:
                halt(i, here[1], seen[key])
                continue
            if meets and other in playing:  # it was here at more frames: it goes on as this one
                halt(other, frame, here)
            seen[key] = here
        # the bound falls where a game lost points, or stopped to go on as one that did
        if cutoff is not None and (
            freed
            or any(recorders[env_of[i]].reward < r for i, r in zip(order, before, strict=True))
        ):
            most = [cutoff.max_score - lost(i, 0, cap) for i in range(len(options))]
            cutoff.check(weights, most, steps)
        for env in freed:  # each starts the next start, checked from its first step on
            start(env)
        freed.clear()

    if playing or waiting:
        return [], steps

    def score_at(game: int, frame: int) -> float:
        g = games[game]
        if g.link is None or frame <= g.end:
            return next((r for f, r in reversed(g.scored) if f <= frame), 0.0)
        other, at, score = g.link
        return g.score + score_at(other, at + frame - g.end) - score

    def last_frame(game: int) -> int:
        g = games[game]
        return g.end if g.link is None else g.end + last_frame(g.link[0]) - g.link[1]

    return [score_at(i, min(last_frame(i), cap)) for i in range(len(options))], steps


def every_start(pipeline: dict[str, Any], game: str) -> dict[int, float]:
    """Each start the pipeline's NoopReset can give (its NOOP frames) with its probability;
    ConfigError for a pipeline without NoopReset."""
    return probe_starts(pipeline, game)[0]


def probe_starts(pipeline: dict[str, Any], game: str) -> tuple[dict[int, float], float]:
    """``every_start``'s starts, and the emulator's own sticky-action probability: a gym
    id such as ALE/Pong-v5 brings its own, whatever the pipeline says."""
    probe = make_env(pipeline, game)
    try:
        return noop_stage(probe).starts(), emulator_sticky(probe)
    finally:
        probe.close()


class KeptEnvs:
    """What a run's every-start evaluations play on, made by the first and kept for the
    rest: the starts (a probe env's) and, without sticky actions, the envs that play them
    (``MERGING_ENVS``). Making an env loads the game's ROM, a large part of an every-start
    evaluation's CPU, and without sticky actions the envs are unseeded and each game is a
    new one (``new_game``), so an env that played before plays the same game: ALE's
    reset does not clear the RAM a game left, which the game's own start must (Pong's and
    Breakout's do: tests/run/test_evaluation.py). With sticky actions each evaluation
    seeds envs of its own. One evaluation at a time plays them; ``close`` once none
    does."""

    def __init__(self) -> None:
        self.probed: tuple[dict[int, float], float] | None = None
        self.envs: list[gym.Env] = []
        self.made_for: tuple[str, str, int, int] | None = None

    def starts(self, pipeline: dict[str, Any], game: str) -> tuple[dict[int, float], float]:
        """``probe_starts``, probed once."""
        if self.probed is None:
            self.probed = probe_starts(pipeline, game)
        return self.probed

    def exact_envs(
        self, pipeline: dict[str, Any], game: str, count: int, max_frames: int
    ) -> list[gym.Env]:
        """``count`` unseeded envs, made the first time; ValueError where a call asks
        for other envs than the first made (a run's never do)."""
        wanted = (repr(pipeline), game, count, max_frames)
        if not self.envs:
            self.envs = evaluation_envs(pipeline, game, count, None, max_frames)
            self.made_for = wanted
        elif wanted != self.made_for:
            raise ValueError(f"kept envs were made for {self.made_for}, not {wanted}")
        return self.envs

    def close(self) -> None:
        envs, self.envs = self.envs, []
        for env in envs:
            env.close()


# The envs a merged every-start evaluation plays its starts on, in turn: each env made
# loads the game's ROM, most starts meet another within steps, and a batch of this many
# observations costs a forward pass about what one costs.
MERGING_ENVS = 8


def play_every_start(
    pipeline: dict[str, Any],
    game: str,
    net: torch.nn.Module,
    max_frames: int,
    seed: int = 0,
    device: torch.device | None = None,
    stop: threading.Event | None = None,
    merge: bool = True,
    kept: KeptEnvs | None = None,
    cutoff: Cutoff | None = None,
) -> dict[str, Any]:
    """One greedy game of ``net`` from each start NoopReset can give, side by side (with
    sticky actions, env i seeded ``seed + i``): the NOOP frames of each start, its
    probability, its score, their weighted mean, the agent steps played (``played``), and
    whether these are the only games the agent can play (no sticky actions: then the mean
    is its expected greedy score, exactly, and games that meet are played once:
    ``play_merging``; ``merge=False`` plays every game out). ``stop`` ends play early,
    with no scores and a mean of nan; ``kept``: the starts and envs of the evaluations
    before, left open (``KeptEnvs``); ``cutoff``: play stops once the mean can no longer
    reach its target, with no scores, a mean of nan and ``at_most`` the most it could have
    been (else None). ConfigError for a pipeline without NoopReset."""
    starts, sticky = kept.starts(pipeline, game) if kept else probe_starts(pipeline, game)
    exact = sticky == 0.0
    device = device or torch.device("cpu")
    options = [{NOOPS: n} for n in starts]
    # no sticky actions: the emulator draws no random numbers, and unseeded envs are made
    # for less (make_env); merged, a few envs play the starts in turn
    merging = exact and merge
    count = min(len(starts), MERGING_ENVS) if merging else len(starts)
    if kept is not None and merging:
        envs, keep = kept.exact_envs(pipeline, game, count, max_frames), True
    else:
        envs = evaluation_envs(pipeline, game, count, None if exact else seed, max_frames)
        keep = False
    weights = np.array(list(starts.values()))
    at_most = None
    cut = {"cutoff": cutoff, "weights": weights.tolist()}
    try:
        if merging:
            scores, steps = play_merging(envs, net, device, options, max_frames, stop, **cut)
        else:
            rng = np.random.default_rng(seed)
            scores = play_side_by_side(envs, net, device, 0.0, rng, stop, options, **cut)
            steps = sum(env.recorder.agent_steps for env in envs)  # type: ignore[attr-defined]
    except CutShort as cut_short:
        scores, steps, at_most = [], cut_short.played, cut_short.at_most
    finally:
        if not keep:
            for env in envs:
                env.close()
    whole = len(scores) == len(starts)
    return {
        "noops": list(starts),
        "weights": weights.tolist(),
        "scores": scores if whole else [],
        "mean": float(np.dot(weights, scores)) if whole else float("nan"),
        "at_most": at_most,
        "played": steps,
        "exact": exact,
    }


class Evaluation:
    """Plays ``eval.episodes`` games (or one from every start: ``eval.every_start``) with
    a snapshot of ``weights`` (a network's state dict: the online network's, or their
    average: ``average``) in a background thread, so the loop (and in parallel mode, the
    learner) never waits for it. ``frames``, ``seconds`` and ``run_cpu_seconds`` (the
    run's CPU time) say when the snapshot was taken: the score is of the weights then.
    ``kept``: the envs the run's every-start evaluations play again (``KeptEnvs``);
    ``cutoff``: the games stop once their mean can no longer reach its target, and
    ``at_most`` is then the most it could have been (``Cutoff``)."""

    def __init__(
        self,
        plan: Plan,
        weights: dict[str, torch.Tensor],
        frames: int,
        seconds: float = 0.0,
        run_cpu_seconds: float | None = None,
        average: bool = False,
        kept: KeptEnvs | None = None,
        cutoff: Cutoff | None = None,
    ) -> None:
        ev = plan.preset.eval
        self.frames, self.seconds, self.run_cpu_seconds = frames, seconds, run_cpu_seconds
        self.average = average  # whether ``weights`` are an average (eval.average_steps)
        self.net_state = {k: v.detach().clone() for k, v in weights.items()}
        snapshot = build_network(plan.preset.dqn, plan.obs_shape, plan.actions).to(plan.device)
        snapshot.load_state_dict(self.net_state)
        snapshot.eval()
        self.stop = threading.Event()
        self.scores: list[float] = []  # each game's; with eval.every_start, each start's
        self.mean = float("nan")  # theirs; with eval.every_start, weighted as drawn
        self.at_most: float | None = None  # cut short (cutoff): the most the mean could be
        self.error: BaseException | None = None
        self.cpu_seconds = 0.0  # this thread's CPU time (not torch's pool threads)
        seed = evaluation_seed(plan.preset.run.seed, frames)

        def play() -> None:
            start = time.thread_time()
            if PER_THREAD_THREADS:
                torch.set_num_threads(1)
            envs: list[gym.Env] = []
            game = plan.preset.env.game
            try:
                if ev.every_start:
                    played = play_every_start(
                        plan.pipeline,
                        game,
                        snapshot,
                        ev.max_frames,
                        seed,
                        plan.device,
                        self.stop,
                        kept=kept,
                        cutoff=cutoff,
                    )
                    self.scores, self.mean = played["scores"], played["mean"]
                    self.at_most = played["at_most"]
                    return
                envs = evaluation_envs(plan.pipeline, game, ev.episodes, seed, ev.max_frames)
                rng = np.random.default_rng(seed)
                self.scores = play_side_by_side(
                    envs, snapshot, plan.device, ev.epsilon, rng, stop=self.stop, cutoff=cutoff
                )
                self.mean = float(np.mean(self.scores)) if self.scores else float("nan")
            except CutShort as cut_short:
                self.at_most = cut_short.at_most
            except BaseException as err:  # reported on the main thread by result()
                self.error = err
            finally:
                for env in envs:
                    env.close()
                self.cpu_seconds = time.thread_time() - start

        self.thread = threading.Thread(target=play, name="atari-speed-eval", daemon=True)
        self.thread.start()

    def finished(self) -> bool:
        return not self.thread.is_alive()

    def result(self) -> float:
        """The mean score of the games played (``eval.every_start``: of the starts,
        weighted as a reset draws them), or where they were cut short the most it could
        have been (``at_most``); re-raises what stopped the thread."""
        if self.error is not None:
            raise self.error
        return self.mean if self.at_most is None else self.at_most

    def wait(self) -> None:
        """Until the games are over. A short join at a time, so that Ctrl-C and SIGTERM
        (raised in the main thread between two) still end the run."""
        while self.thread.is_alive():
            self.thread.join(timeout=0.5)

    def cancel(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
