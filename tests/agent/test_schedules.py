"""Exploration and the update-to-data schedule every mode shares."""

from __future__ import annotations

import pytest

from atari_speed.agent.schedules import UpdateSchedule, actor_epsilon, epsilon_at
from atari_speed.core.config import ExploreConfig


def test_epsilon_decays_linearly_then_stays():
    explore = ExploreConfig(epsilon_start=1.0, epsilon_final=0.1, epsilon_frames=1000)
    assert epsilon_at(explore, 0) == 1.0
    assert epsilon_at(explore, 500) == pytest.approx(0.55)
    assert epsilon_at(explore, 1000) == pytest.approx(0.1)
    assert epsilon_at(explore, 10**9) == pytest.approx(0.1)


def test_per_actor_fixed_epsilons():
    spread = ExploreConfig(actor_base=0.4)
    eps = [actor_epsilon(spread, i, 4) for i in range(4)]
    assert eps == pytest.approx([0.4, 0.4 ** (1 + 7 / 3), 0.4 ** (1 + 14 / 3), 0.4**8])
    assert actor_epsilon(spread, 0, 1) == 0.4
    assert actor_epsilon(ExploreConfig(), 2, 4) is None  # follows the schedule


def test_one_update_per_train_every_frames_after_the_warm_up():
    schedule = UpdateSchedule(train_every=3, initial=200)
    assert [schedule.due(f) for f in (0, 200, 202, 203, 205, 206, 600)] == [0, 0, 0, 1, 1, 2, 133]


@pytest.mark.parametrize(("train_every", "step"), [(1, 1), (4, 1), (2, 8), (16, 3)])
def test_actor_credits_never_deadlock(train_every, step):
    # Actors take one credit a frame, in whole steps of `step` frames; the learner returns
    # train_every credits per update it makes, when one is due. Whatever the ratio, some
    # side can always move, and actors never get further ahead than their credits.
    schedule = UpdateSchedule(train_every=train_every, initial=50)
    credits, frames, updates = schedule.actor_credits(step), 0, 0
    for _ in range(5000):
        if credits >= step:
            credits -= step
            frames += step
        elif schedule.due(frames) > updates:
            updates += 1
            credits += train_every
        else:
            pytest.fail(f"deadlock at {frames} frames, {updates} updates, {credits} credits")
    assert updates > 0 and frames - 50 - updates * train_every <= 2 * step + train_every


def test_two_actors_take_the_two_ends_of_the_spread():
    spread = ExploreConfig(actor_base=0.4)
    assert [actor_epsilon(spread, i, 2) for i in range(2)] == pytest.approx([0.4, 0.4**8])


def test_no_update_is_due_before_the_warm_up_ends_even_at_one_frame_per_update():
    schedule = UpdateSchedule(train_every=1, initial=200)
    assert [schedule.due(f) for f in (0, 199, 200, 201, 250)] == [0, 0, 0, 1, 50]


def test_actor_credits_are_the_warm_up_left_plus_the_lead():
    schedule = UpdateSchedule(train_every=3, initial=50)
    assert schedule.actor_credits(4) == 50 + 2 * 4 + 3
    # a resumed replay that restored 30 transitions needs 20 more before learning
    assert schedule.actor_credits(4, restored=30) == 20 + 2 * 4 + 3
    # one that restored more than the warm-up needs none: the lead alone
    assert schedule.actor_credits(4, restored=80) == 2 * 4 + 3
