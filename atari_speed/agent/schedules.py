"""What follows the frame count: exploration, and how many SGD updates are due.

Accounting is the same in every mode: frames are agent steps summed over all envs and
epsilon follows frames. DQN makes one SGD update of ``dqn.batch_size`` per
``dqn.train_every`` frames once the replay holds ``replay.initial`` transitions, whatever
the env count and whoever steps the envs (this process, or actor processes); that is
``UpdateSchedule``. PQN uses neither field: it makes ``pqn.epochs`` x ``pqn.minibatches``
updates per rollout (``agent/pqn.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from atari_speed.core.config import ExploreConfig


def epsilon_at(explore: ExploreConfig, frames: int) -> float:
    """The linear schedule: ``epsilon_start`` at frame 0 to ``epsilon_final`` at
    ``epsilon_frames``, then flat."""
    fraction = min(1.0, frames / explore.epsilon_frames)
    return explore.epsilon_start + fraction * (explore.epsilon_final - explore.epsilon_start)


def actor_epsilon(explore: ExploreConfig, index: int, actors: int) -> float | None:
    """Actor ``index``'s fixed epsilon (Ape-X's spread), or None to follow the schedule."""
    base = explore.actor_base
    if base <= 0:
        return None
    return base ** (1 + 7 * index / (actors - 1)) if actors > 1 else base


@dataclass(frozen=True)
class UpdateSchedule:
    """Frames collected -> SGD updates due: the update-to-data ratio, in one place.

    ``frames`` counts the transitions in the replay since it was (re)filled from empty: a
    resumed run that restored its replay counts those too and learns at once; one that
    refills warms up again.
    """

    train_every: int  # frames per update
    initial: int  # transitions in the replay before the first update

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
