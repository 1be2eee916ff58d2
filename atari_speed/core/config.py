"""Training presets: typed, frozen config read from ``presets/*.toml``.

Each section is a frozen dataclass; every field is documented once, in its ``doc``
metadata, which ``train.py --help`` prints. Unknown sections or keys, wrong types and
impossible values fail at start with the file, key, value and what is allowed.

Counts say their unit: an agent step is one action of one env (summed over all envs: 128
envs stepped once are 128 agent steps); an emulator frame is one frame of ALE, and an
agent step is the pipeline's frame skip of them (MaxAndSkip's, 4). Fields that count
agent steps are named ``*_steps`` or say so in their doc; their earlier names, which said
frames, are still read (``RENAMED``).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from atari_speed.core.errors import ConfigError

PRESET_DIR = Path(__file__).resolve().parents[2] / "presets"

MODES = ("baseline", "n-env", "parallel", "auto")
ENGINES = ("local", "ray")
DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("sync", "subprocess", "ale", "auto")
NETWORKS = ("nature", "nips", "small")


def doc(text: str, default: Any, **limits: Any) -> Any:
    """A field with its documentation and allowed values kept beside it."""
    return field(default=default, metadata={"doc": text, **limits})


@dataclass(frozen=True)
class RunConfig:
    mode: str = doc(
        "baseline (the book's loop on ptan) | n-env | parallel | auto (chosen from the "
        "machine: cores, GPU and a few seconds of calibration; see train.py --check)",
        "n-env",
        choices=MODES,
    )
    envs: int = doc(
        'envs stepped together (n-env), or per actor (parallel); "auto" (or 0) = chosen '
        "from the machine",
        1,
        low=0,
        high=256,
        auto=0,
    )
    actors: int = doc(
        "actor processes in parallel mode; 0 = n-env mode: the same actor in the "
        "learner's process (one process, for debugging)",
        1,
        low=0,
        high=64,
    )
    publish_every: int = doc("SGD updates between weight publishes to actors (parallel)", 50, low=1)
    engine: str = doc(
        "where parallel mode's actors run: local (processes on this machine, shared memory) "
        "| ray (Ray actors, on this machine or a cluster: uv run --extra ray; docs/scale.md)",
        "local",
        choices=ENGINES,
    )
    ray_address: str = doc(
        "engine = ray: the cluster to join (train.py --ray-address, as `ray start --head` "
        "prints it); '' = start a local Ray for this run and stop it at its end",
        "",
    )
    ray_steps: int = doc(
        "engine = ray, DQN: vector steps an actor plays per batch it sends the learner (its "
        "observations cross the object store as one set of arrays; PQN sends pqn.rollout "
        "steps)",
        16,
        low=1,
    )
    actor_restarts: int = doc(
        "engine = ray: times a dead actor is restarted (its process killed, its node lost) "
        "before the run ends naming it",
        3,
        low=0,
    )
    learner_threads: int = doc(
        "torch threads of the learner (parallel); 0 = all cores, since "
        "actors mostly wait for frame credits",
        0,
        low=0,
        high=256,
    )
    steps: int = doc(
        "budget in agent steps, summed over all envs (train.py --steps; was run.frames)",
        2_000_000,
        low=1,
    )
    emulator_frames: int = doc(
        "budget in emulator frames, as published baselines count (train.py "
        "--emulator-frames); 0 = unused: run.steps is the budget. Converted once, at start, "
        "to run.steps = this / the pipeline's frame skip (MaxAndSkip's, 4: 10M emulator "
        "frames are 2.5M agent steps), rounded up; not with run.steps in the same file or "
        "command line",
        0,
        low=0,
    )
    seconds: float = doc(
        "wall-clock budget in seconds; 0 = none (whichever budget ends first stops the run)",
        0.0,
        low=0.0,
    )
    device: str = doc("auto (CUDA when present) | cpu | cuda", "auto", choices=DEVICES)
    seed: int = doc("seed of envs, exploration and network init", 0, low=0)
    stop_reward: float = doc("solved when the smoothed game score reaches this", 18.0)
    checkpoint_every: int = doc(
        "agent steps between checkpoint.pt writes (and best.pt's, while it follows the "
        "smoothed score: its new bests are kept in memory until then)",
        100_000,
        low=1,
    )
    replay_save: bool = doc(
        "DQN: save the replay (compressed) to replay.npz beside checkpoint.pt on the "
        "way out (end, Ctrl-C, SIGTERM, error), so --resume trains on at once instead of "
        "refilling it",
        True,
    )
    replay_save_every: int = doc(
        "agent steps between replay.npz writes besides the one on the way out (n-env mode; in "
        "parallel mode actors write while a copy would be read, so only on the way out); "
        "0 = only on the way out",
        0,
        low=0,
    )
    resume_phases: int = doc(
        "--resume (n-env mode): the checkpoint holds how many agent steps each env was into "
        "its game, and each env, restarted, is first brought back to that point of a game "
        "of the network's, untrained and uncounted (up to this many steps; 0 = off). The "
        "emulators cannot be saved, so without it every game restarts at once and the first "
        "rollouts all come from games' openings, played move for move on every env that drew "
        "the same no-op start where the game is deterministic (Pong without sticky actions); "
        "PQN, which learns only from what its envs play now, would train on those copies. "
        "The games then in progress are not scored: each joins the replay to what follows "
        "and is no game of the run's. Checkpoints without phases, and parallel mode, fall "
        "back to resume_spread",
        10_000,
        low=0,
    )
    resume_spread: int = doc(
        "--resume (n-env and parallel mode): each env first plays a random number of random "
        "actions, 0 to this many, untrained, and its game then in progress is not scored. The "
        "envs cannot be saved, so a resume restarts every game at once, and at a low epsilon a "
        "deterministic game (Pong without sticky actions) is played move for move on every "
        "env that drew the same of ALE's few no-op starts: PQN, which learns only from what "
        "its envs play now, would train on a few games copied many times; 0 = off (what a "
        "spread did and did not mend: docs/log/pong-fast.md)",
        0,
        low=0,
    )
    channels_last: bool = doc(
        "keep conv weights, and the frames fed to them, channels-last: same math, a memory "
        "layout oneDNN's CPU convolutions may run faster on (benchmarks/sgd_step.py measures "
        "it on this machine; docs/pong-fast.md)",
        False,
    )
    keep_freed_memory: bool = doc(
        "keep the memory the run frees for its next tensors (glibc's malloc, on Linux: freed "
        "heap is not given back to the system, and blocks below 32 MiB come from it rather "
        "than from fresh pages): the same math, without a page fault per 4 KiB of every "
        "minibatch's new tensors; the process keeps its peak memory. Nothing where the C "
        "library is not glibc (docs/roofline.md)",
        True,
    )
    log_every: int = doc("agent steps between TensorBoard scalars and summary.json", 2_000, low=1)
    amp: bool = doc(
        "deprecated: use run.precision = 'bf16'; true still means bf16 on a CUDA GPU that has it",
        False,
    )
    precision: str = doc(
        "fp32 | bf16 | auto: bf16 autocasts the network's forward and backward passes (the "
        "loss and the optimizer's state stay fp32); auto takes bf16 where one update measured "
        "at start is faster in it (CPUs with AMX or AVX512-BF16, recent GPUs), and says so",
        "fp32",
        choices=("fp32", "bf16", "auto"),
    )
    act_bf16: bool = doc(
        "with bf16 (run.precision), the training envs' forward passes that choose their "
        "actions autocast to bf16 too, and PQN's targets reuse the values they give; off, "
        "they run in fp32. Evaluations and play.py act in fp32 either way. bf16 may pick "
        "another greedy action where two actions' values are close (benchmarks/bf16_q.py)",
        False,
    )
    compile: bool = doc(
        "PQN: the SGD updates run the network through torch.compile (fused kernels; the same "
        "math up to rounding). Acting, targets and evaluations run it uncompiled. The first "
        "update waits for the compile (seconds; torch caches it for later runs); where the "
        "compiler fails, the run says so and goes on uncompiled. Where measured, pong-fast "
        "stepped faster with it but needed more agent steps to solve, and atari-84 stepped "
        "slower (docs/roofline.md)",
        False,
    )
    profile: bool = doc(
        "time every stage of the learner, its actor processes and env workers (train.py "
        "--profile; Ray actors are not profiled): a table at the end, profile.json and "
        "TensorBoard profile/<stage>",
        False,
    )


@dataclass(frozen=True)
class EnvConfig:
    game: str = doc("ALE game name: pong, breakout, ms_pacman, ...", "pong")
    pipeline: Any = doc("a wrappers/ name, a path, or an inline table", "book")
    backend: str = doc(
        "env execution backend: sync | subprocess | ale | auto (the fastest that works)",
        "sync",
        choices=BACKENDS,
    )
    image_backend: str = doc(
        "resize backend replacing the pipeline's: opencv | pillow | numpy; '' = the "
        "pipeline's own (the ale backend always resizes with ALE's code)",
        "",
        choices=("", "opencv", "pillow", "numpy"),
    )


ALGORITHMS = ("dqn", "pqn")
OPTIMIZERS = ("adam", "radam")


@dataclass(frozen=True)
class DQNConfig:
    algorithm: str = doc(
        "dqn (replay buffer, target network) | pqn (vectorised Q(lambda) on rollouts: no "
        "replay, no target network; see [pqn])",
        "dqn",
        choices=ALGORITHMS,
    )
    learning_rate: float = doc(
        "the optimizer's learning rate (Adam; PQN's: pqn.optimizer)", 1e-4, low=0.0, high=1.0
    )
    adam_eps: float = doc(
        "Adam's (and RAdam's) epsilon, added to the root of each weight's running mean squared "
        "gradient: a weight whose gradients are well below it steps less than the learning "
        "rate, where with a tiny epsilon every weight steps about the learning rate however "
        "small its gradients have become",
        1e-8,
        low=0.0,
        high=1.0,
    )
    gamma: float = doc("discount", 0.99, low=0.0, high=1.0)
    batch_size: int = doc("transitions per SGD update (never scaled by envs)", 32, low=1)
    train_every: int = doc("agent steps per SGD update: the update-to-data ratio", 1, low=1)
    target_sync: int = doc("SGD updates between target network syncs", 1_000, low=1)
    n_steps: int = doc("n-step returns", 1, low=1, high=20)
    double: bool = doc("double DQN target", False)
    network: str = doc(
        "conv torso: nature (2015, 84x84) | nips (2013, 84x84, fewer and narrower layers: "
        "cheaper per update) | small "
        "(the nips shape for 42x42 frames)",
        "nature",
        choices=NETWORKS,
    )
    dueling: bool = doc("dueling head", False)
    layer_norm: bool = doc("normalise every hidden layer before its ReLU (PQN needs it)", False)
    huber: bool = doc("Huber loss instead of the book's MSE", False)
    quantiles: int = doc(
        "0 = one value per action; else this many quantiles of the return per action, learnt "
        "by quantile regression (QR-DQN's quantile Huber loss, Dabney et al. 2018) towards "
        "PQN's Q(lambda) returns, the actions chosen and the returns bootstrapped by their "
        'mean (docs/atari.md, "DoubleDunk with quantiles"). PQN only, not dueling',
        0,
        low=0,
        high=256,
    )


@dataclass(frozen=True)
class PQNConfig:
    # The defaults are pong-fast's, so `train.py --help` shows a recipe that solved Pong.
    rollout: int = doc("steps of every env per rollout (dqn.algorithm = pqn)", 32, low=1)
    epochs: int = doc("passes of SGD over each rollout", 4, low=1)
    minibatches: int = doc("minibatches per epoch; envs x rollout must divide by it", 16, low=1)
    q_lambda: float = doc(
        "lambda of the Q(lambda) returns: 0 = 1-step, 1 = Monte Carlo", 0.65, low=0.0, high=1.0
    )
    q_lambda_take_off: float = doc(
        "lambda of the Q(lambda) returns while the smoothed training score is below "
        "pqn.q_lambda_score_from (before the first game ends too); pqn.q_lambda from there, "
        "both ways: a longer return leans less on Q values that are still far off, a shorter "
        "one is less noisy once they are not; negative = pqn.q_lambda throughout",
        -1.0,
        low=-1.0,
        high=1.0,
    )
    q_lambda_score_from: float = doc(
        "the smoothed training score from which pqn.q_lambda replaces "
        "pqn.q_lambda_take_off; with pqn.follow_greedy, a greedy evaluation at "
        "run.stop_reward (by pqn.follow_margin) counts as a smoothed run.stop_reward",
        0.0,
    )
    optimizer: str = doc("adam | radam", "radam", choices=OPTIMIZERS)
    fused_optimizer: bool = doc(
        "the optimizer steps through torch's fused Adam kernel, one pass over the weights "
        "where torch's foreach RAdam makes one per operation (RAdam's rectified steps are "
        "Adam's with its rate and epsilon rescaled: agent/optim.py); on a CPU or CUDA GPU, "
        "elsewhere torch's own. The same update to within float32 rounding, so another draw "
        "than without it on the same seed. Where measured, training stepped faster with it "
        "but pong-fast solved later and atari-84's one Breakout run scored lower "
        "(docs/roofline.md)",
        False,
    )
    max_grad_norm: float = doc("clip the gradient's norm to this; 0 = no clipping", 10.0, low=0.0)
    lr_decay: bool = doc("decay the learning rate linearly to 0 over pqn.lr_decay_steps", True)
    lr_decay_steps: int = doc(
        "agent steps over which the learning rate decays to 0 (pqn.lr_decay); 0 = run.steps."
        " Set it to keep a recipe's schedule when run.steps changes (was pqn.lr_decay_frames)",
        0,
        low=0,
    )
    lr_at_stop: float = doc(
        "the learning rate falls linearly with the smoothed training score, from its full "
        "value at pqn.lr_score_from to this factor at run.stop_reward (times the decay over "
        "agent steps): an agent that has learnt the game moves less while the training score "
        "catches up, and one that slips back gets its rate back; 1 = the score does not set it",
        1.0,
        low=0.0,
        high=1.0,
    )
    lr_score_from: float = doc(
        "the smoothed training score from which the learning rate falls towards "
        "pqn.lr_at_stop; below run.stop_reward",
        0.0,
    )
    adam_eps_at_stop: float = doc(
        "Adam's epsilon rises with the smoothed training score over the learning rate's "
        "fall (pqn.lr_score_from to run.stop_reward), linearly from dqn.adam_eps to this, "
        "both ways: late in a run the gradients are small, and a tiny epsilon lets "
        "every weight keep stepping about the learning rate on noise, where the take-off "
        "needs it tiny; 0 = the score does not set it",
        0.0,
        low=0.0,
        high=1.0,
    )
    updates_at_stop: float = doc(
        "the SGD updates per rollout fall linearly with the smoothed training score, as the "
        "learning rate does: from pqn.epochs x pqn.minibatches (times pqn.updates_at_start's "
        "factor while epsilon falls) at pqn.updates_score_from to "
        "this share of them at run.stop_reward (at least one): an agent that has learnt the game "
        "spends less of each frame on SGD while the training score catches up; 1 = the score "
        "does not set them",
        1.0,
        low=0.0,
        high=1.0,
    )
    updates_at_start: float = doc(
        "the SGD updates per rollout at agent step 0, as a factor of pqn.epochs x "
        "pqn.minibatches (below 1 fewer, above 1 more epochs), moving linearly with the agent "
        "steps to the factor 1 at explore.epsilon_steps: how much of the run's SGD goes to "
        "the rollouts played while epsilon falls; multiplies pqn.updates_at_stop's share; "
        "1 = the same count from the start",
        1.0,
        low=0.0,
        high=8.0,
    )
    updates_score_from: float = doc(
        "the smoothed training score from which the SGD updates fall towards "
        "pqn.updates_at_stop; below run.stop_reward",
        0.0,
    )
    follow_greedy: bool = doc(
        "while the last greedy evaluation's mean is at or above run.stop_reward (by "
        "pqn.follow_margin), what falls with the smoothed score takes its value at "
        "run.stop_reward, however far "
        "that score lags: the learning rate and SGD updates (pqn.lr_at_stop, "
        "pqn.updates_at_stop), epsilon (explore.epsilon_at_stop) and acting with the "
        "average (pqn.act_average_from); and where the evaluation played the weights' "
        "average, the learner goes on from that average (its weights set to it). The "
        "greedy agent can play the game well before the training games' score says so; an "
        "evaluation below it gives the schedules back. Needs evaluations (eval.every)",
        False,
    )
    follow_margin: float = doc(
        "how far above run.stop_reward the last greedy evaluation's mean must be for "
        "pqn.follow_greedy (and pqn.hold_at_greedy) to act on it; the greedy solve, best.pt "
        "and the evaluations' cut still count from run.stop_reward. A held agent that plays "
        "barely the stop reward leaves the smoothed training score many of its games to "
        "climb; 0 = from the stop reward",
        0.0,
        low=0.0,
    )
    hold_at_greedy: bool = doc(
        "PQN's alone (refused with DQN), with pqn.follow_greedy (without it, nothing): "
        "while the last greedy evaluation's mean is at or above run.stop_reward (by "
        "pqn.follow_margin), the learner makes no SGD update and the weights (their "
        "average too) are the ones that evaluation played, so the training games that the "
        "stop rule scores are played by the agent it scored; no further evaluation is made "
        "(it would play the same weights), the final one aside",
        False,
    )
    new_games_at_hold: bool = doc(
        "with pqn.hold_at_greedy, when the hold begins every env starts a new game and the "
        "games then in progress are not scored, so each game the stop rule scores is the "
        "held agent's from its start: a game the learner began and the held agent ends is "
        "neither's, and a deterministic greedy agent put in a state its own games never "
        "reach can lose it point after point. n-env mode",
        False,
    )
    learn_while_held: bool = doc(
        "with pqn.hold_at_greedy, what is held is the agent that plays the training games, "
        "not the learner: SGD goes on at the rates for run.stop_reward (they no longer fall "
        "back), evaluations go on, and one that pqn.follow_greedy acts on and whose mean is "
        "above the held agent's hands the training games to the agent it played. An agent "
        "barely above the stop reward, held while the training score is far below it, asks "
        "the smoothed score hundreds of its games; a better one asks fewer. n-env mode",
        False,
    )
    act_with_average: bool = doc(
        "while the smoothed training score is at or above pqn.act_average_from, the actor "
        "plays (the training games included) with the weights' moving average "
        "(eval.average_steps) instead of the weights as they are; learning is unchanged, "
        "its targets still the online network's. n-env mode",
        False,
    )
    act_average_from: float = doc(
        "the smoothed training score from which pqn.act_with_average acts with the average",
        0.0,
    )


@dataclass(frozen=True)
class ReplayConfig:
    size: int = doc("transitions kept", 100_000, low=1)
    initial: int = doc("transitions collected before learning starts", 10_000, low=1)


@dataclass(frozen=True)
class ExploreConfig:
    epsilon_start: float = doc("epsilon at agent step 0", 1.0, low=0.0, high=1.0)
    epsilon_final: float = doc("epsilon after epsilon_steps", 0.02, low=0.0, high=1.0)
    epsilon_steps: int = doc(
        "agent steps of the linear decay (was explore.epsilon_frames)", 100_000, low=1
    )
    actor_base: float = doc(
        "parallel mode with actor processes: 0 = every actor follows the schedule above; else "
        "actor i of N keeps the fixed epsilon base^(1 + 7i/(N-1)), as "
        "Ape-X (0.4 there)",
        0.0,
        low=0.0,
        high=1.0,
    )
    epsilon_at_stop: float = doc(
        "below 0 = off; else, from epsilon_steps on, epsilon falls linearly with the smoothed "
        "training score, from epsilon_final at explore.score_from to this at "
        "run.stop_reward (at or below epsilon_final; a finite stop_reward): more random "
        "actions while the agent learns, fewer once its training games must score the stop "
        "reward. n-env and baseline modes only (parallel mode's actors do not see the score; "
        "auto then takes n-env). A score already past score_from at epsilon_steps moves "
        "epsilon there at once",
        -1.0,
        low=-1.0,
        high=1.0,
    )
    score_from: float = doc(
        "the smoothed training score from which epsilon falls towards "
        "explore.epsilon_at_stop (unused while that is off); below run.stop_reward",
        0.0,
    )
    epsilon_peak: float = doc(
        "below 0 = off; else (with explore.epsilon_at_stop set) epsilon first rises with the "
        "smoothed training score, from epsilon_final at explore.score_rise_from to this at "
        "explore.score_from, then falls to epsilon_at_stop: a take-off at epsilon_final, more "
        "random actions while the agent that scores refines its play, few once it must win",
        -1.0,
        low=-1.0,
        high=1.0,
    )
    score_rise_from: float = doc(
        "the smoothed training score from which epsilon rises towards explore.epsilon_peak "
        "(unused while that is off); below explore.score_from",
        0.0,
    )
    env_spread: float = doc(
        "1 = off; else, from explore.epsilon_steps on, env i of N acts at epsilon x "
        "env_spread^(i/(N-1)), at most 1: a few envs explore more, as Ape-X's actors do, while "
        "the others play near greedy, and the spread falls with epsilon (explore.epsilon_at_stop). "
        "n-env mode only",
        1.0,
        low=1.0,
    )


@dataclass(frozen=True)
class EvalConfig:
    every: int = doc("agent steps between evaluations; 0 = off", 0, low=0)
    episodes: int = doc("games per evaluation; unused with eval.every_start", 5, low=1)
    epsilon: float = doc("epsilon while evaluating", 0.01, low=0.0, high=1.0)
    from_reward: float = doc(
        "evaluate only once the smoothed training score has reached this: evaluations "
        "cost CPU while they could not yet score well; -1000 = from the first agent step",
        -1000.0,
    )
    max_cpu_share: float = doc(
        "the most of the run's CPU, from the first evaluation on, that evaluations may take: "
        "the next one starts eval.every agent steps after the last began, and not before "
        "their CPU so far and its own (guessed at the last one's) fit this share of the "
        "run's CPU since the first began. The run's CPU is this process's (the "
        "learner, ALE's threads, the games; not the subprocess backend's workers or parallel "
        "mode's actors, local or Ray, so there evaluations come less often than the share "
        "allows); an evaluation's is its games' thread's. 1 = every eval.every agent steps, "
        "whatever that costs",
        1.0,
        low=0.01,
        high=1.0,
    )
    max_frames: int = doc(
        "a game's most emulator frames in an evaluation, after which it ends, scored as it "
        "stands (0 = the emulator's 108,000): a greedy agent caught in an endless rally "
        "(Pong without sticky actions) otherwise plays every game to 108,000",
        0,
        low=0,
    )
    at_end: bool = doc(
        "when the run ends by itself (solved, out of agent steps or of time; not Ctrl-C, "
        "SIGTERM or an error), wait for the evaluation in progress, then evaluate the final "
        "weights unless one just did: best.pt is then the best of every evaluation, the last "
        "weights' included. It comes after the solve and the budget, so it delays no figure "
        "of the run, and eval_cpu_share leaves it out. With eval.every = 0 it is the run's "
        "one evaluation. Once the smoothed score has reached eval.from_reward",
        False,
    )
    every_start: bool = doc(
        "each evaluation plays one greedy game from every start the pipeline's NoopReset "
        "can give, weighted by how often a reset draws it, in place of eval.episodes games: "
        "without sticky actions a greedy agent's game is a function of its start, so this is "
        "its expected greedy score, exactly, where a few games draw a few starts. Games that "
        "reach the same state are played once (run.evaluation.play_merging). Needs "
        "eval.epsilon = 0 and a pipeline with NoopReset and no sticky actions",
        False,
    )
    average_steps: int = doc(
        "0 = evaluations play the weights as they are; else an exponential moving average "
        "of the weights over about this many agent steps (its time constant), and best.pt "
        "keeps the best-evaluated average (from eval.average_from): a policy that wobbles "
        "from update to update is judged and kept smoothed. Training learns with the "
        "weights as they are",
        0,
        low=0,
    )
    average_from: float = doc(
        "with eval.average_steps, the smoothed training score from which evaluations play "
        "the average; below it they play the weights as they are (-1000: the average from "
        "the start). Set with pqn.act_with_average, the same score as pqn.act_average_from "
        "makes evaluations judge the policy that plays the training games: while the "
        "weights move fast, an average of them can lag into play that none of them plays",
        -1000.0,
    )
    max_game_score: float = doc(
        "0 = off; else the most a game's positive rewards can add up to (Pong: 21, the "
        "points that end a game). A game then scores at most this less the points it has "
        "lost so far, and an evaluation stops as soon as its games' mean can no longer reach "
        "run.stop_reward: while the agent is far from it, a few of its games' points tell "
        "as much as the whole games. Until an evaluation has reached run.stop_reward, and "
        "not the final one (eval.at_end). One cut short is recorded with the most its mean "
        "could have been (at_most in summary.json, eval/at_most in TensorBoard), is never "
        "best.pt's, and counts for pqn.follow_greedy as below run.stop_reward",
        0.0,
        low=0.0,
    )
    snapshots: bool = doc(
        "keep the weights each evaluation was given, as they are, in the run directory's "
        "snapshots/<agent step>.pt, and with eval.average_steps their average beside them "
        "(<agent step>-average.pt): weights-only checkpoints to watch with play.py or to "
        "play from every start with benchmarks/starts.py, so that the weights and their "
        "average at one agent step compare on the same games",
        False,
    )


@dataclass(frozen=True)
class Preset:
    run: RunConfig = field(default_factory=RunConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    dqn: DQNConfig = field(default_factory=DQNConfig)
    pqn: PQNConfig = field(default_factory=PQNConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    explore: ExploreConfig = field(default_factory=ExploreConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    name: str = "custom"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, section: str, **changes: Any) -> Preset:
        return dataclasses.replace(
            self, **{section: dataclasses.replace(getattr(self, section), **changes)}
        )


SECTIONS: dict[str, type] = {
    f.name: f.default_factory  # type: ignore[misc]
    for f in dataclasses.fields(Preset)
    if f.name != "name"
}

# Old name -> new name of every field renamed when "frames" came to mean emulator frames
# only. Preset files, --set, and the presets that checkpoints and summary.json files of
# earlier versions saved still use the old names, so they are read as the new ones,
# silently: a resumed old checkpoint could not act on a note, and docs/log's commands
# (--frames, --set pqn.lr_decay_frames=...) are history that still runs.
RENAMED: dict[str, str] = {
    "run.frames": "run.steps",
    "pqn.lr_decay_frames": "pqn.lr_decay_steps",
    "explore.epsilon_frames": "explore.epsilon_steps",
}


def _check(where: str, key: str, value: Any, f: dataclasses.Field, hint: Any) -> Any:
    meta = f.metadata
    if hint is Any:
        return value
    if "auto" in meta and value == "auto":
        return meta["auto"]
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, hint) or (hint is not bool and isinstance(value, bool)):
        raise ConfigError(
            f"{where}: {key} = {value!r} has type {type(value).__name__}; expected "
            f"{hint.__name__}" + (f" ({meta['doc']})" if "doc" in meta else "")
        )
    if "choices" in meta and value not in meta["choices"]:
        raise ConfigError(f"{where}: {key} = {value!r}; allowed: {' | '.join(meta['choices'])}")
    low, high = meta.get("low"), meta.get("high")
    # NaN compares false with every bound, so it would pass them and fail far later
    nan = isinstance(value, float) and math.isnan(value) and (low, high) != (None, None)
    if nan or (low is not None and value < low) or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ConfigError(f"{where}: {key} = {value!r} is out of range; expected {bounds}")
    return value


def new_names(source: str, section: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` (one section's keys) with every old name of ``RENAMED`` as its new name;
    ConfigError if one field is given under both."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        new = RENAMED.get(f"{section}.{key}", f"{section}.{key}").partition(".")[2]
        if new != key and new in raw:
            raise ConfigError(
                f"{source}: [{section}] {key} and {new} are both given; {key} is the old "
                f"name of {new}: give {new} only"
            )
        out[new] = value
    return out


def _one_budget(source: str, raw: Mapping[str, Any]) -> None:
    """run.steps and run.emulator_frames are one budget in two units: not both at once."""
    if "steps" in raw and raw.get("emulator_frames"):
        raise ConfigError(
            f"{source}: [run] steps = {raw['steps']!r} and emulator_frames = "
            f"{raw['emulator_frames']!r} are both given; the budget is one or the other"
        )


def build_section(source: str, section: str, raw: Mapping[str, Any], base: Any) -> Any:
    """Return ``base`` with the keys of ``raw`` applied, each checked. Old field names
    (``RENAMED``) are read as the new ones."""
    cls = SECTIONS[section]
    hints = get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    raw = new_names(source, section, raw)
    changes = {}
    if section == "run":
        _one_budget(source, raw)
        if "steps" in raw:  # a budget in steps replaces one in emulator frames given before
            changes["emulator_frames"] = 0
    for key, value in raw.items():
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(
                f"{source}: [{section}] unknown key {key!r}{hint}; allowed: {', '.join(known)}"
            )
        changes[key] = _check(f"{source}: [{section}]", key, value, known[key], hints[key])
    return dataclasses.replace(base, **changes)


def apply(source: str, preset: Preset, raw: Mapping[str, Any], check: bool = True) -> Preset:
    """``preset`` with ``raw``'s sections applied, each field checked; ``check``: and the
    fields checked against each other (off while several overrides are applied in turn)."""
    for section, table in raw.items():
        if section not in SECTIONS:
            raise ConfigError(
                f"{source}: unknown section [{section}]; allowed: {', '.join(SECTIONS)}"
            )
        if not isinstance(table, Mapping):
            raise ConfigError(f"{source}: [{section}] must be a table, got {table!r}")
        preset = dataclasses.replace(
            preset, **{section: build_section(source, section, table, getattr(preset, section))}
        )
    if check:
        check_consistency(source, preset)
    return preset


def check_consistency(source: str, preset: Preset) -> None:
    if preset.run.mode == "parallel" and preset.env.backend == "subprocess":
        raise ConfigError(
            f"{source}: [env] backend = 'subprocess' with mode = 'parallel'; actors are "
            "processes already and step their envs in-process: use 'sync' or 'ale'"
        )
    if preset.run.engine == "ray" and preset.run.mode != "parallel":
        raise ConfigError(
            f"{source}: [run] engine = 'ray' with mode = {preset.run.mode!r}; Ray runs parallel "
            "mode's actors: use mode = 'parallel'"
        )
    explore = preset.explore
    if explore.epsilon_peak >= 0 and explore.epsilon_at_stop < 0:
        raise ConfigError(
            f"{source}: [explore] epsilon_peak = {explore.epsilon_peak:g} without "
            "epsilon_at_stop: epsilon rises to the peak and falls to epsilon_at_stop; set it "
            "(e.g. to epsilon_final), or epsilon_peak = -1"
        )
    if preset.run.mode == "parallel":
        _check_parallel_actors(source, preset)
    if explore.env_spread > 1.0 and preset.run.mode == "baseline":
        raise ConfigError(
            f"{source}: [explore] env_spread = {explore.env_spread:g} with mode = "
            f"'{preset.run.mode}': the spread is over n-env mode's envs; use mode = 'n-env', or "
            "env_spread = 1"
        )
    if explore.epsilon_at_stop >= 0:
        _check_epsilon_rise_and_fall(source, explore)
        _check_score_fall(
            source,
            ("explore", "epsilon_at_stop", explore.epsilon_at_stop),
            ("score_from", explore.score_from),
            preset.run.stop_reward,
            "epsilon falls",
        )
    if preset.eval.every_start and preset.eval.epsilon != 0:
        raise ConfigError(
            f"{source}: [eval] every_start = true with epsilon = {preset.eval.epsilon:g}: every "
            "start's one game is the greedy agent's; set epsilon = 0, or every_start = false"
        )
    max_score, stop = preset.eval.max_game_score, preset.run.stop_reward
    if max_score and not (math.isfinite(stop) and max_score >= stop):
        raise ConfigError(
            f"{source}: [eval] max_game_score = {max_score:g} with run.stop_reward = {stop:g}: "
            "evaluations stop once they cannot reach stop_reward, which a game scoring at most "
            "max_game_score never does; set a finite stop_reward at most max_game_score, or "
            "max_game_score = 0"
        )
    if preset.eval.average_from > -1000 and preset.eval.average_steps <= 0:
        raise ConfigError(
            f"{source}: [eval] average_from = {preset.eval.average_from:g} with average_steps "
            "= 0: there is no average to play; set eval.average_steps, or average_from = -1000"
        )
    _check_follow_greedy(source, preset)
    if preset.dqn.quantiles and (preset.dqn.algorithm != "pqn" or preset.dqn.dueling):
        raise ConfigError(
            f"{source}: [dqn] quantiles = {preset.dqn.quantiles} with algorithm = "
            f"'{preset.dqn.algorithm}' and dueling = {str(preset.dqn.dueling).lower()}: "
            "quantiles are learnt by PQN's learner, without a dueling head; set algorithm = "
            "'pqn' and dueling = false, or quantiles = 0"
        )
    if preset.dqn.algorithm == "pqn":
        _check_pqn(source, preset)
        return
    # PQN's alone: DQN's loops have no average to act with, and count the SGD updates due
    # per agent step, which a held learner would pile up
    pqn_only = [key for key in ("act_with_average", "hold_at_greedy") if getattr(preset.pqn, key)]
    if pqn_only:
        named = " and ".join(f"{key} = true" for key in pqn_only)
        off = " ".join(f"--set pqn.{key}=false" for key in pqn_only)
        raise ConfigError(
            f"{source}: [pqn] {named} with [dqn] algorithm = '{preset.dqn.algorithm}': "
            f"PQN's only; set algorithm = 'pqn', or {off}"
        )
    if preset.replay.initial > preset.replay.size:
        raise ConfigError(
            f"{source}: [replay] initial = {preset.replay.initial} exceeds size = "
            f"{preset.replay.size}"
        )
    if preset.dqn.batch_size > preset.replay.initial:
        raise ConfigError(
            f"{source}: [dqn] batch_size = {preset.dqn.batch_size} exceeds [replay] initial = "
            f"{preset.replay.initial}: the first batch could not be drawn"
        )
    if preset.run.mode == "baseline" and preset.run.envs != 1:
        raise ConfigError(
            f"{source}: [run] envs = {preset.run.envs} with mode = 'baseline'; the book's "
            "baseline steps 1 env: use mode = 'n-env' for more"
        )


def parallel_unfollowed(preset: Preset) -> list[tuple[str, str, str]]:
    """The fields set that parallel mode's actor processes cannot follow, each as (field,
    its value, the value that turns it off): the actors see neither the training score
    nor the weights' average, nor when the learner holds the greedy agent, and their envs
    are not n-env mode's to spread epsilon over (pong-fast sets three of them)."""
    follows = []
    if preset.explore.epsilon_at_stop >= 0:
        follows.append(("explore.epsilon_at_stop", f"{preset.explore.epsilon_at_stop:g}", "-1"))
    if preset.pqn.act_with_average and preset.run.actors:
        follows.append(("pqn.act_with_average", "true", "false"))
    if preset.pqn.new_games_at_hold and preset.pqn.hold_at_greedy and preset.run.actors:
        follows.append(("pqn.new_games_at_hold", "true", "false"))
    if preset.pqn.learn_while_held and preset.pqn.hold_at_greedy and preset.run.actors:
        follows.append(("pqn.learn_while_held", "true", "false"))
    if preset.explore.env_spread > 1.0:
        follows.append(("explore.env_spread", f"{preset.explore.env_spread:g}", "1"))
    return follows


def _check_parallel_actors(source: str, preset: Preset) -> None:
    """Parallel mode with fields its actors cannot follow is refused, in one line that
    names them all and says how to turn each off."""
    follows = parallel_unfollowed(preset)
    if follows:
        named = " and ".join(f"{field} = {value}" for field, value, _ in follows)
        off = " ".join(f"--set {field}={value}" for field, _, value in follows)
        raise ConfigError(
            f"{source}: [run] mode = 'parallel' with {named}: its actors see neither the "
            f"training score, the weights' average, the hold nor an epsilon spread over n-env "
            f"mode's envs; use mode = 'n-env', or {off}"
        )


def _check_epsilon_rise_and_fall(source: str, explore: ExploreConfig) -> None:
    """Epsilon follows the score up to its peak (epsilon_final where there is none) and
    down from it, never the other way."""
    top, top_name = explore.epsilon_final, "epsilon_final"
    if explore.epsilon_peak >= 0:
        top, top_name = explore.epsilon_peak, "epsilon_peak"
        if explore.epsilon_peak < explore.epsilon_final:
            raise ConfigError(
                f"{source}: [explore] epsilon_peak = {explore.epsilon_peak:g} is below "
                f"epsilon_final = {explore.epsilon_final:g}: epsilon rises with the score to it"
            )
        if explore.score_rise_from >= explore.score_from:
            raise ConfigError(
                f"{source}: [explore] score_rise_from = {explore.score_rise_from:g} is not below "
                f"score_from = {explore.score_from:g}: epsilon rises between the two"
            )
    if explore.epsilon_at_stop > top:
        raise ConfigError(
            f"{source}: [explore] epsilon_at_stop = {explore.epsilon_at_stop:g} is above "
            f"{top_name} = {top:g}: epsilon falls with the score to it"
        )


def _check_follow_greedy(source: str, preset: Preset) -> None:
    """``pqn.follow_greedy`` acts on the greedy evaluations, with either algorithm (DQN's
    epsilon follows the score too): there must be evaluations, able to reach its bar."""
    run, pqn = preset.run, preset.pqn
    if not pqn.follow_greedy:
        return
    follow_from = run.stop_reward + pqn.follow_margin
    if 0 < preset.eval.max_game_score < follow_from:
        raise ConfigError(
            f"{source}: [pqn] follow_margin = {pqn.follow_margin:g} over run.stop_reward = "
            f"{run.stop_reward:g} asks for a greedy mean of {follow_from:g}, above [eval] "
            f"max_game_score = {preset.eval.max_game_score:g}: it would never act; lower "
            "follow_margin, or follow_greedy = false"
        )
    if preset.eval.every <= 0:
        raise ConfigError(
            f"{source}: [pqn] follow_greedy = true with [eval] every = 0: it follows the "
            "greedy evaluations' score; set eval.every, or follow_greedy = false"
        )


def _check_pqn(source: str, preset: Preset) -> None:
    run, pqn = preset.run, preset.pqn
    if run.mode == "baseline":
        raise ConfigError(
            f"{source}: [dqn] algorithm = 'pqn' with mode = 'baseline'; baseline mode is the "
            "book's DQN: use mode = 'n-env', 'parallel' or 'auto' for PQN"
        )
    actors = run.actors if run.mode == "parallel" else 0
    envs = run.envs * max(actors, 1)
    if run.envs and (envs * pqn.rollout) % pqn.minibatches:
        across = f" ({actors} actors x {run.envs})" if actors > 1 else ""
        raise ConfigError(
            f"{source}: [pqn] minibatches = {pqn.minibatches} does not divide a rollout of "
            f"{envs} envs{across} x {pqn.rollout} steps = {envs * pqn.rollout} transitions"
        )
    if pqn.act_with_average and preset.eval.average_steps <= 0:
        raise ConfigError(
            f"{source}: [pqn] act_with_average = true with [eval] average_steps = 0: there "
            "is no average to act with; set eval.average_steps, or act_with_average = false"
        )
    # The two PQN schedules that fall with the score (1 = off): field, its start, what falls.
    for key, start_key, what in (
        ("lr_at_stop", "lr_score_from", "the learning rate falls"),
        ("updates_at_stop", "updates_score_from", "the SGD updates fall"),
    ):
        if getattr(pqn, key) < 1.0:
            _check_score_fall(
                source,
                ("pqn", key, getattr(pqn, key)),
                (start_key, getattr(pqn, start_key)),
                run.stop_reward,
                what,
            )
    if pqn.adam_eps_at_stop > 0:
        _check_score_fall(
            source,
            ("pqn", "adam_eps_at_stop", pqn.adam_eps_at_stop),
            ("lr_score_from", pqn.lr_score_from),
            run.stop_reward,
            "Adam's epsilon rises",
        )


def _check_score_fall(
    source: str,
    field: tuple[str, str, float],
    start: tuple[str, float],
    stop_reward: float,
    what: str,
) -> None:
    """A schedule that falls with the smoothed training score, set by ``field`` (section,
    key, value) from ``start`` (key, score) to the stop reward (``what`` falls, as the errors
    say it), needs a stop reward that is
    a number above its start."""
    (section, key, value), (start_key, start_score) = field, start
    if not math.isfinite(stop_reward):
        raise ConfigError(
            f"{source}: [{section}] {key} = {value:g} with [run] stop_reward = "
            f"{stop_reward:g}: {what} with the score to the stop reward, which must be a "
            "number"
        )
    if start_score >= stop_reward:
        raise ConfigError(
            f"{source}: [{section}] {start_key} = {start_score:g} is not below [run] "
            f"stop_reward = {stop_reward:g}: {what} with the score between the two"
        )


def preset_path(name: str | Path) -> Path:
    path = Path(name)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise ConfigError(f"preset {str(name)!r}: no such file")
        return path
    path = PRESET_DIR / f"{name}.toml"
    if not path.is_file():
        known = sorted(p.stem for p in PRESET_DIR.glob("*.toml"))
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"preset {str(name)!r}: no such preset{hint}; known: {', '.join(known)}")
    return path


def _read(name: str | Path) -> tuple[Path, dict[str, Any]]:
    path = preset_path(name)
    try:
        return path, tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None


def apply_overrides(preset: Preset, overrides: list[str]) -> Preset:
    """``preset`` with ``section.key=value`` overrides applied in turn (a later one of a
    field wins); ConfigError if they give one field under its old and new names, or the
    budget both in agent steps and in emulator frames."""
    given: dict[str, tuple[str, str, Any]] = {}  # new section.key -> (item, its key, value)
    for item in overrides:
        section, key, value = parse_override(item)
        name = RENAMED.get(f"{section}.{key}", f"{section}.{key}")
        if name in given and given[name][1] != key:
            raise ConfigError(
                f"--set {given[name][0]} and --set {item}: one field under its old and new "
                f"names; give {name} only"
            )
        given[name] = (item, key, value)
    steps, frames = given.get("run.steps"), given.get("run.emulator_frames")
    if steps and frames and frames[2]:
        raise ConfigError(
            f"--set {steps[0]} and --set {frames[0]}: a budget in agent steps and one in "
            "emulator frames; the budget is one or the other"
        )
    for item in overrides:
        section, key, value = parse_override(item)
        preset = apply(f"--set {item}", preset, {section: {key: value}}, check=False)
    # the fields against each other once all are given, so their order does not matter
    if overrides:
        check_consistency("--set " + " --set ".join(overrides), preset)
    return preset


def steps_budget(preset: Preset, frame_skip: int) -> tuple[Preset, str | None]:
    """``preset`` with its budget in agent steps: run.emulator_frames, where given, becomes
    run.steps (divided by the pipeline's ``frame_skip``, rounded up) and is then 0, so the
    preset a run saves states its budget once. The line saying so, or None."""
    frames = preset.run.emulator_frames
    if not frames:
        return preset, None
    steps = -(-frames // frame_skip)
    line = (
        f"budget: run.emulator_frames {frames:,} = run.steps {steps:,} agent steps "
        f"(frame skip {frame_skip})"
    )
    return preset.replace("run", steps=steps, emulator_frames=0), line


def _base(name: str | Path) -> tuple[Path, Preset, Any]:
    """The preset file, its settings outside ``[[variant]]`` tables, and those tables."""
    path, raw = _read(name)
    tables = raw.pop("variant", [])
    return path, apply(str(path), Preset(name=path.stem), raw), tables


def load_preset(name: str | Path, overrides: list[str] = ()) -> Preset:
    """Read a preset file, then apply ``section.key=value`` overrides (TOML values).
    In an ablation preset this is the base the variants change."""
    _, base, _ = _base(name)
    return apply_overrides(base, list(overrides))


def load_variants(name: str | Path, overrides: list[str] = ()) -> list[tuple[str, Preset]]:
    """An ablation preset's ``[[variant]]`` tables, each applied to the file's base and then
    the command line's overrides (which so apply to every variant); [] if it has none.
    Every variant is checked here, before any of them trains."""
    path, base, tables = _base(name)
    if not isinstance(tables, list) or not all(isinstance(t, Mapping) for t in tables):
        raise ConfigError(f"{path}: variant must be [[variant]] tables")
    variants: list[tuple[str, Preset]] = []
    for i, table in enumerate(tables, 1):
        changes = dict(table)
        label = changes.pop("name", None)
        if not isinstance(label, str) or not label.strip():
            raise ConfigError(f'{path}: variant {i} needs a name = "..."')
        if label in (v[0] for v in variants):
            raise ConfigError(f"{path}: variant {i}: name {label!r} is used twice")
        preset = apply(f"{path}: variant {i} ({label})", base, changes)
        variants.append((label, apply_overrides(preset, list(overrides))))
    return variants


def parse_override(item: str) -> tuple[str, str, Any]:
    """``dqn.batch_size=64`` -> ("dqn", "batch_size", 64). Values are TOML, else strings."""
    target, sep, text = item.partition("=")
    section, dot, key = target.strip().partition(".")
    if not sep or not dot or not key:
        raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. dqn.batch_size=64")
    try:
        value = tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = text.strip()
    return section, key.strip(), value


def describe_fields() -> str:
    """Every preset field with its default and doc, for ``--help``."""
    lines = [
        "Old names still read: "
        + ", ".join(f"{old} (now {new})" for old, new in RENAMED.items())
        + "."
    ]
    for section, cls in SECTIONS.items():
        lines.append(f"[{section}]")
        for f in dataclasses.fields(cls):
            lines.append(f"  {f.name:<18} {f.metadata.get('doc', '')} (default {f.default!r})")
    return "\n".join(lines)
