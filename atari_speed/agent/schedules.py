"""What follows the step count: exploration, and how many SGD updates are due.

Accounting is the same in every mode: steps are agent steps summed over all envs and
epsilon follows them. How many updates the steps buy is each algorithm's schedule, in
one place: DQN makes one SGD update of ``dqn.batch_size`` per ``dqn.train_every`` steps
once the replay holds ``replay.initial`` transitions, whatever the env count and whoever
steps the envs (``UpdateSchedule``); PQN makes ``pqn.epochs`` x ``pqn.minibatches`` updates
per rollout (``RolloutSchedule``). ``update_schedule`` picks the preset's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from atari_speed.core.config import ExploreConfig, PQNConfig, Preset


def epsilon_at(
    explore: ExploreConfig,
    steps: int,
    smoothed: float | None = None,
    stop_reward: float | None = None,
) -> float:
    """The linear schedule: ``epsilon_start`` at agent step 0 to ``epsilon_final`` at
    ``epsilon_steps``, then flat; or, with ``explore.epsilon_at_stop`` set and the smoothed
    training score and stop reward given, from there on linear in the score: from
    ``epsilon_final`` at ``explore.score_from`` (or, with ``explore.epsilon_peak`` set, from
    ``epsilon_final`` at ``explore.score_rise_from`` up to the peak at ``score_from``) down
    to ``epsilon_at_stop`` at ``stop_reward``."""
    fraction = min(1.0, steps / explore.epsilon_steps)
    by_steps = explore.epsilon_start + fraction * (explore.epsilon_final - explore.epsilon_start)
    if explore.epsilon_at_stop < 0 or fraction < 1.0 or smoothed is None or stop_reward is None:
        return by_steps
    final = top = by_steps  # epsilon_final, as the step schedule computes it
    if explore.epsilon_peak >= 0:
        top = explore.epsilon_peak
        if smoothed < explore.score_from:
            rise = score_way(smoothed, explore.score_rise_from, explore.score_from)
            return final + rise * (top - final)
    way = score_way(smoothed, explore.score_from, stop_reward)
    return top + way * (explore.epsilon_at_stop - top)


def env_epsilons(
    explore: ExploreConfig, epsilon: float, steps: int, envs: int
) -> float | np.ndarray:
    """Each of ``envs`` envs' epsilon: the run's ``epsilon``, or with ``explore.env_spread``
    from ``epsilon_steps`` on, env i's ``epsilon * env_spread ** (i / (envs - 1))``, at most 1
    (before, the decay from epsilon_start is left as it is)."""
    if explore.env_spread <= 1.0 or envs < 2 or steps < explore.epsilon_steps:
        return epsilon
    return np.minimum(epsilon * explore.env_spread ** np.linspace(0.0, 1.0, envs), 1.0)


def score_way(smoothed: float, start: float, stop: float) -> float:
    """How far the smoothed training score is from ``start`` to ``stop`` (0..1, clipped)."""
    return min(max((smoothed - start) / (stop - start), 0.0), 1.0)


def follows_greedy(preset: Preset, greedy: float | None) -> bool:
    """Whether ``pqn.follow_greedy`` acts on a greedy evaluation's mean: at or above
    run.stop_reward by ``pqn.follow_margin``."""
    pqn = preset.pqn
    return (
        pqn.follow_greedy
        and greedy is not None
        and greedy >= preset.run.stop_reward + pqn.follow_margin
    )


def schedule_score(preset: Preset, smoothed: float | None, greedy: float | None) -> float | None:
    """The score that the schedules falling with it follow (PQN's learning rate and
    updates, epsilon's fall, acting with the average): the smoothed training score, or
    with ``pqn.follow_greedy``, while the last greedy evaluation's mean (``greedy``) is at
    or above ``run.stop_reward`` (by ``pqn.follow_margin``), at least the stop reward. The
    training games lag the agent (each game spans dozens of rollouts, the score averages
    dozens of games), so a greedy agent that plays the game would keep moving, and its
    training games keep being played by the weights of the moment, as if it did not."""
    stop = preset.run.stop_reward
    if follows_greedy(preset, greedy):
        return stop if smoothed is None else max(smoothed, stop)
    return smoothed


def lr_factor(preset: Preset, steps: int, smoothed: float | None) -> float:
    """PQN's learning rate over its start (0..1), two schedules multiplied: linear in
    agent steps to 0 at ``pqn.lr_decay_steps`` (``run.steps`` where that is 0; none without
    ``pqn.lr_decay``), and linear in
    the smoothed training score from 1 at ``pqn.lr_score_from`` to ``pqn.lr_at_stop`` at
    ``run.stop_reward``. The second follows the score both ways: an agent that has learnt
    the game stops moving, and one that slips back gets its learning rate back."""
    pqn = preset.pqn
    horizon = pqn.lr_decay_steps or preset.run.steps
    by_steps = max(1.0 - steps / horizon, 0.0) if pqn.lr_decay else 1.0
    return by_steps * score_fall(
        smoothed, pqn.lr_score_from, preset.run.stop_reward, pqn.lr_at_stop
    )


def adam_eps(preset: Preset, smoothed: float | None) -> float:
    """PQN's Adam epsilon: ``dqn.adam_eps``, or with ``pqn.adam_eps_at_stop`` set, linear
    in the smoothed training score from it at ``pqn.lr_score_from`` to
    ``adam_eps_at_stop`` at ``run.stop_reward``, both ways, over the learning rate's fall."""
    start, at_stop = preset.dqn.adam_eps, preset.pqn.adam_eps_at_stop
    if at_stop <= 0 or smoothed is None:
        return start
    way = score_way(smoothed, preset.pqn.lr_score_from, preset.run.stop_reward)
    return start + way * (at_stop - start)


def q_lambda(preset: Preset, smoothed: float | None) -> float:
    """PQN's lambda for the Q(lambda) returns: ``pqn.q_lambda_take_off`` (where set, 0 or
    more) while the smoothed training score is below ``pqn.q_lambda_score_from`` or no
    game has ended, ``pqn.q_lambda`` from there, both ways."""
    pqn = preset.pqn
    if pqn.q_lambda_take_off < 0 or (smoothed is not None and smoothed >= pqn.q_lambda_score_from):
        return pqn.q_lambda
    return pqn.q_lambda_take_off


def update_share(preset: Preset, steps: int, smoothed: float | None) -> float:
    """The factor of PQN's ``epochs`` x ``minibatches`` updates a rollout gets, two
    schedules multiplied: linear in agent steps from ``pqn.updates_at_start`` at 0 to 1 at
    ``explore.epsilon_steps`` (as epsilon falls), and linear in the smoothed training score
    from 1 at ``pqn.updates_score_from`` to ``pqn.updates_at_stop`` at ``run.stop_reward``,
    both ways, as ``lr_factor``'s second schedule."""
    pqn = preset.pqn
    rise = min(steps / preset.explore.epsilon_steps, 1.0)
    by_steps = pqn.updates_at_start + rise * (1.0 - pqn.updates_at_start)
    return by_steps * score_fall(
        smoothed, pqn.updates_score_from, preset.run.stop_reward, pqn.updates_at_stop
    )


def score_fall(smoothed: float | None, start: float, stop: float, at_stop: float) -> float:
    """1 up to the score ``start``, then linear in the smoothed training score down to
    ``at_stop`` at ``stop``; 1 before the first game or where ``at_stop`` is 1."""
    if smoothed is None or at_stop >= 1.0:
        return 1.0
    return 1.0 - score_way(smoothed, start, stop) * (1.0 - at_stop)


def actor_epsilon(explore: ExploreConfig, index: int, actors: int) -> float | None:
    """Actor ``index``'s fixed epsilon (Ape-X's spread), or None to follow the schedule."""
    base = explore.actor_base
    if base <= 0:
        return None
    return base ** (1 + 7 * index / (actors - 1)) if actors > 1 else base


@dataclass(frozen=True)
class UpdateSchedule:
    """DQN's frames collected -> SGD updates due: the update-to-data ratio, in one place.

    ``frames`` counts the transitions in the replay since it was (re)filled from empty: a
    resumed run that restored its replay counts those too and learns at once; one that
    refills warms up again.
    """

    train_every: int  # agent steps per update
    initial: int  # transitions in the replay before the first update
    batch: int  # transitions sampled per update: dqn.batch_size

    @classmethod
    def of(cls, preset: Preset) -> UpdateSchedule:
        return cls(preset.dqn.train_every, preset.replay.initial, preset.dqn.batch_size)

    def due(self, frames: int) -> int:
        """Updates that should have been made once ``frames`` transitions are collected."""
        return max(0, frames - self.initial) // self.train_every

    def actor_credits(self, frames_per_step: int, restored: int = 0) -> int:
        """Frame credits actor processes start with (each frame takes one, each update
        gives back ``train_every``): what the warm-up still needs (less the ``restored``
        transitions of a resumed replay) plus a lead of two vector steps of every actor and
        one update's frames. With less, actors that are all blocked might not yet have made
        the next update due, and nobody would move."""
        return max(0, self.initial - restored) + 2 * frames_per_step + self.train_every

    @property
    def updates_per_frame(self) -> float:
        return 1 / self.train_every

    def update_to_data(self) -> dict[str, Any]:
        """The ratio as summary.json reports it: gradient samples per frame."""
        return {
            "batch_size": self.batch,
            "train_every": self.train_every,
            "samples_per_frame": self.batch / self.train_every,
        }


@dataclass(frozen=True)
class RolloutSchedule:
    """PQN's rollout -> the SGD updates made on it: ``epochs`` passes over its
    ``transitions``, each shuffled and cut into ``minibatches`` (a remainder is left out).
    The update-to-data ratio, in one place, as ``UpdateSchedule`` is DQN's."""

    transitions: int  # per rollout: envs x pqn.rollout
    epochs: int
    minibatches: int

    @classmethod
    def of(cls, pqn: PQNConfig, transitions: int) -> RolloutSchedule:
        return cls(transitions, pqn.epochs, pqn.minibatches)

    @property
    def batch(self) -> int:
        """Transitions per SGD update: a minibatch."""
        return self.transitions // self.minibatches

    @property
    def updates(self) -> int:
        """SGD updates per rollout."""
        return self.epochs * self.minibatches

    @property
    def updates_per_frame(self) -> float:
        return self.updates / self.transitions

    def update_to_data(self) -> dict[str, Any]:
        """The ratio as summary.json reports it, at the full count: every transition is
        sampled once an epoch (pqn.updates_at_stop and pqn.updates_at_start change the
        count as the run goes; train/sgd_updates in TensorBoard has what was made)."""
        return {
            "rollout": self.transitions,
            "minibatch": self.batch,
            "epochs": self.epochs,
            "samples_per_frame": float(self.epochs),
        }

    def updates_at(self, share: float) -> int:
        """SGD updates per rollout at ``share`` times the full count (``update_share``;
        above 1, more epochs): at least one."""
        return max(1, round(self.updates * share))

    def minibatch_indices(
        self, rng: np.random.Generator, updates: int | None = None
    ) -> Iterator[np.ndarray]:
        """The rollout's transitions (flat indices) of each update in turn: every epoch a
        new shuffle, drawn from ``rng`` as that epoch begins. ``updates`` (all of them if
        None) cuts the last epoch short: fewer updates sample every transition fewer
        times, the last pass a random part of them; more than all of them add epochs."""
        batch, left = self.batch, self.updates if updates is None else updates
        while left > 0:
            order = rng.permutation(self.transitions)
            for start in range(0, batch * min(left, self.minibatches), batch):
                yield order[start : start + batch]
            left -= self.minibatches


def update_schedule(preset: Preset, envs: int) -> UpdateSchedule | RolloutSchedule:
    """The preset's schedule: DQN's, or PQN's over rollouts of ``envs`` x ``pqn.rollout``
    transitions (DQN's does not depend on the env count)."""
    if preset.dqn.algorithm == "pqn":
        return RolloutSchedule.of(preset.pqn, envs * preset.pqn.rollout)
    return UpdateSchedule.of(preset)
