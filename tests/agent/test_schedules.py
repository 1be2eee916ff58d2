"""Exploration and the update-to-data schedules: DQN's per agent step, PQN's per rollout."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from atari_speed.agent.schedules import (
    RolloutSchedule,
    UpdateSchedule,
    actor_epsilon,
    adam_eps,
    env_epsilons,
    epsilon_at,
    lr_factor,
    q_lambda,
    update_schedule,
    update_share,
)
from atari_speed.core.config import ExploreConfig, load_preset


def test_epsilon_decays_linearly_then_stays():
    explore = ExploreConfig(epsilon_start=1.0, epsilon_final=0.1, epsilon_steps=1000)
    assert epsilon_at(explore, 0) == 1.0
    assert epsilon_at(explore, 500) == pytest.approx(0.55)
    assert epsilon_at(explore, 1000) == pytest.approx(0.1)
    assert epsilon_at(explore, 10**9) == pytest.approx(0.1)


def test_epsilon_falls_with_the_smoothed_score_once_its_step_schedule_ends():
    explore = ExploreConfig(
        epsilon_start=1.0,
        epsilon_final=0.01,
        epsilon_steps=1000,
        epsilon_at_stop=0.001,
        score_from=0.0,
    )
    # during the step schedule, and where no score is known, the steps alone set it
    assert epsilon_at(explore, 500, 9.0, 18.0) == pytest.approx(0.505)
    # a score already past score_from when the step schedule ends moves epsilon there
    assert epsilon_at(explore, 999, 9.0, 18.0) == pytest.approx(0.01099)
    assert epsilon_at(explore, 1000, 9.0, 18.0) == pytest.approx(0.0055)
    assert epsilon_at(explore, 2000, None, 18.0) == pytest.approx(0.01)
    assert epsilon_at(explore, 2000, -20.0, 18.0) == pytest.approx(0.01)  # below score_from
    assert epsilon_at(explore, 2000, 9.0, 18.0) == pytest.approx(0.0055)  # half way
    assert epsilon_at(explore, 2000, 30.0, 18.0) == pytest.approx(0.001)  # never past it
    off = ExploreConfig(epsilon_final=0.01, epsilon_steps=1000)  # epsilon_at_stop -1
    assert epsilon_at(off, 2000, 17.0, 18.0) == pytest.approx(0.01)


def test_epsilon_rises_with_the_score_to_its_peak_then_falls():
    explore = ExploreConfig(
        epsilon_start=1.0,
        epsilon_final=0.001,
        epsilon_steps=1000,
        epsilon_at_stop=0.0,
        score_from=10.0,
        epsilon_peak=0.01,
        score_rise_from=0.0,
    )
    plain = ExploreConfig(epsilon_start=1.0, epsilon_final=0.001, epsilon_steps=1000)
    # the take-off is the plain schedule's, to the last bit
    for smoothed in (-21.0, -5.0, 0.0):
        assert epsilon_at(explore, 5000, smoothed, 18.0) == epsilon_at(plain, 5000)
    assert epsilon_at(explore, 500, 9.0, 18.0) == epsilon_at(plain, 500)  # steps first
    assert epsilon_at(explore, 5000, 5.0, 18.0) == pytest.approx(0.0055)  # half way up
    assert epsilon_at(explore, 5000, 10.0, 18.0) == pytest.approx(0.01)  # the peak
    assert epsilon_at(explore, 5000, 14.0, 18.0) == pytest.approx(0.005)  # half way down
    assert epsilon_at(explore, 5000, 25.0, 18.0) == pytest.approx(0.0)


def test_a_runs_epsilon_follows_its_smoothed_score():
    from types import SimpleNamespace

    from atari_speed.run.session import Run

    falls = ["explore.epsilon_at_stop=0.0", "explore.score_from=0.0"]
    preset = load_preset("pong-fast", ["explore.epsilon_final=0.01", *falls])

    def run_at(smoothed):
        scores, record = SimpleNamespace(smoothed=smoothed), SimpleNamespace(eval_reward=None)
        tracker = SimpleNamespace(scores=scores, record=record)
        run = SimpleNamespace(preset=preset, frames=10**7, tracker=tracker, held_score=None)
        run.schedule_score = lambda: Run.schedule_score(run)
        return run

    assert Run.epsilon.fget(run_at(None)) == pytest.approx(0.01)
    assert Run.epsilon.fget(run_at(9.0)) == pytest.approx(0.005)


def test_an_env_spread_scales_each_envs_epsilon_once_the_decay_is_over():
    explore = ExploreConfig(epsilon_final=0.001, epsilon_steps=1000, env_spread=100.0)
    assert env_epsilons(explore, 0.5, 999, 5) == 0.5  # the decay from epsilon_start as it is
    spread = env_epsilons(explore, 0.001, 1000, 5)
    assert spread == pytest.approx([0.001, 0.001 * 100**0.25, 0.01, 0.001 * 100**0.75, 0.1])
    # it follows epsilon wherever the schedule takes it, to none at all, and stops at 1
    assert env_epsilons(explore, 0.0, 10**6, 5).tolist() == [0.0] * 5
    assert env_epsilons(explore, 0.05, 10**6, 3) == pytest.approx([0.05, 0.5, 1.0])
    assert env_epsilons(dataclasses.replace(explore, env_spread=1.0), 0.001, 10**6, 5) == 0.001
    assert env_epsilons(explore, 0.001, 10**6, 1) == 0.001  # one env: nothing to spread over


def test_a_runs_envs_act_at_its_epsilon_spread_over_them():
    from types import SimpleNamespace

    from atari_speed.run.session import Run

    preset = load_preset("pong-fast", ["explore.env_spread=30"])
    scores, record = SimpleNamespace(smoothed=-15.0), SimpleNamespace(eval_reward=None)
    tracker = SimpleNamespace(scores=scores, record=record)
    run = SimpleNamespace(preset=preset, tracker=tracker, held_score=None)
    run.schedule_score = lambda: Run.schedule_score(run)
    for frames, first, last in ((0, 1.0, 1.0), (10**6, 0.001, 0.03)):
        run.frames = frames
        run.epsilon = Run.epsilon.fget(run)
        eps = np.atleast_1d(Run.env_epsilons(run, 64))
        assert eps[0] == pytest.approx(first) and eps[-1] == pytest.approx(last)


def test_epsilon_falling_with_the_score_is_refused_where_it_cannot_be_followed():
    from atari_speed.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"score_from = 18 is not below .* stop_reward = 18"):
        load_preset("pong-fast", ["explore.epsilon_at_stop=0.0", "explore.score_from=18.0"])
    with pytest.raises(ConfigError, match=r"mode = 'parallel' with explore.epsilon_at_stop = 0"):
        load_preset("pong-fast", ["explore.epsilon_at_stop=0.0", "run.mode='parallel'"])
    with pytest.raises(ConfigError, match=r"epsilon_at_stop = 0.01 is above epsilon_final"):
        load_preset("pong-fast", ["explore.epsilon_at_stop=0.01"])  # pong-fast ends at 0.001
    rise = ["explore.epsilon_at_stop=0.001", "explore.score_from=10.0"]
    with pytest.raises(ConfigError, match=r"epsilon_peak = 0.0005 is below epsilon_final"):
        load_preset("pong-fast", [*rise, "explore.epsilon_peak=0.0005"])
    with pytest.raises(ConfigError, match=r"score_rise_from = 10 is not below score_from = 10"):
        load_preset("pong-fast", [*rise, "explore.epsilon_peak=0.01", "explore.score_rise_from=10"])
    with pytest.raises(ConfigError, match=r"epsilon_at_stop = 0.02 is above epsilon_peak = 0.01"):
        load_preset(
            "pong-fast", [*rise, "explore.epsilon_peak=0.01", "explore.epsilon_at_stop=0.02"]
        )
    with pytest.raises(ConfigError, match=r"epsilon_peak = 0.01 without epsilon_at_stop"):
        load_preset("pong-fast", ["explore.epsilon_peak=0.01", "explore.epsilon_at_stop=-1"])
    with pytest.raises(ConfigError, match=r"env_spread = 30 with mode = 'baseline'"):
        load_preset("atari-fast", ["explore.env_spread=30", "run.mode='baseline'"])
    # parallel mode's actors name it with the other fields they cannot follow
    with pytest.raises(ConfigError, match=r"'parallel' with explore.env_spread = 30: .* or --set"):
        load_preset("atari-fast", ["explore.env_spread=30", "run.mode='parallel'"])
    with pytest.raises(ConfigError, match=r"stop_reward = inf: epsilon falls"):
        load_preset("atari-fast", ["explore.epsilon_at_stop=0.0"])
    with pytest.raises(ConfigError, match=r"lr_at_stop = 0.5 with \[run\] stop_reward = inf"):
        load_preset("atari-fast", ["pqn.lr_at_stop=0.5"])


def test_learning_rate_follows_steps_and_the_smoothed_score():
    preset = load_preset(
        "pong-fast",
        ["run.steps=1000", "run.stop_reward=18.0", "pqn.lr_at_stop=0.2", "pqn.lr_score_from=0.0"],
    )
    assert lr_factor(preset, 0, None) == 1.0  # no game yet: steps alone
    assert lr_factor(preset, 250, -20.0) == pytest.approx(0.75)  # below lr_score_from
    assert lr_factor(preset, 0, 9.0) == pytest.approx(0.6)  # half way to stop_reward
    assert lr_factor(preset, 500, 9.0) == pytest.approx(0.3)  # the two multiply
    assert lr_factor(preset, 0, 30.0) == pytest.approx(0.2)  # never below lr_at_stop
    assert lr_factor(preset, 2000, 0.0) == 0.0  # past the step horizon
    flat = load_preset("pong-fast", ["pqn.lr_decay=false", "pqn.lr_at_stop=0.2"])
    assert lr_factor(flat, 10**9, 9.0) == pytest.approx(0.6)  # the score's part alone
    off = load_preset("pong-fast", ["run.steps=1000", "pqn.lr_at_stop=1.0"])
    assert lr_factor(off, 500, 17.0) == pytest.approx(0.5)  # lr_at_stop 1: score ignored


def test_the_learning_rate_decays_over_lr_decay_steps_where_given_else_the_budget():
    own = load_preset("pong-fast", ["run.steps=1000", "pqn.lr_decay_steps=4000"])
    assert lr_factor(own, 1000, None) == pytest.approx(0.75)
    # the old name, as docs/log's commands give it, sets the same field
    old = load_preset("pong-fast", ["run.frames=1000", "pqn.lr_decay_frames=4000"])
    assert old == own


def test_a_score_schedule_must_start_below_the_stop_reward():
    from atari_speed.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"lr_score_from = 18 is not below .* stop_reward = 18"):
        load_preset("pong-fast", ["pqn.lr_at_stop=0.2", "pqn.lr_score_from=18.0"])
    # lr_at_stop 1: the score is unused
    load_preset("pong-fast", ["pqn.lr_at_stop=1.0", "pqn.lr_score_from=18.0"])


def test_a_runs_learning_rate_follows_its_smoothed_score():
    from types import SimpleNamespace

    from atari_speed.run.session import Run

    preset = load_preset(
        "pong-fast", ["pqn.lr_at_stop=0.2", "pqn.lr_score_from=0.0", "pqn.follow_greedy=false"]
    )

    def run_at(smoothed, greedy=None, preset=preset):
        scores, record = SimpleNamespace(smoothed=smoothed), SimpleNamespace(eval_reward=greedy)
        tracker = SimpleNamespace(scores=scores, record=record)
        run = SimpleNamespace(preset=preset, frames=0, tracker=tracker, held_score=None)
        run.schedule_score = lambda: Run.schedule_score(run)
        return run

    assert Run.decay_progress(run_at(None)) == 0.0
    assert Run.decay_progress(run_at(9.0)) == pytest.approx(0.4)
    # without pqn.follow_greedy a greedy evaluation does not move it
    assert Run.decay_progress(run_at(9.0, 20.0)) == pytest.approx(0.4)
    follow_sets = ["pqn.lr_at_stop=0.2", "pqn.follow_greedy=true", "eval.every=100000"]
    follow = load_preset("pong-fast", [*follow_sets, "pqn.follow_margin=0"])  # from 18 itself
    assert Run.decay_progress(run_at(9.0, 20.0, follow)) == pytest.approx(0.8)  # at 18's
    assert Run.decay_progress(run_at(None, 18.0, follow)) == pytest.approx(0.8)
    assert Run.decay_progress(run_at(9.0, 17.9, follow)) == pytest.approx(0.4)  # below 18
    # pqn.follow_margin: from 18 + 1 on, not from 18
    margin = load_preset("pong-fast", [*follow_sets, "pqn.follow_margin=1"])
    assert Run.decay_progress(run_at(9.0, 18.9, margin)) == pytest.approx(0.4)
    assert Run.decay_progress(run_at(9.0, 19.0, margin)) == pytest.approx(0.8)


def test_a_runs_learner_gets_the_share_of_updates_its_smoothed_score_sets():
    from types import SimpleNamespace

    from atari_speed.run.session import Run

    overrides = [
        "pqn.lr_at_stop=0.2",
        "pqn.updates_at_stop=0.25",
        "pqn.updates_score_from=0.0",
        "pqn.adam_eps_at_stop=1e-5",
        "pqn.q_lambda_take_off=0.8",
        "pqn.q_lambda_score_from=10.0",
    ]
    preset = load_preset("pong-fast", overrides)
    calls = []
    learner = SimpleNamespace(learn=lambda *args: calls.append(args))
    run = SimpleNamespace(
        preset=preset,
        frames=0,
        tracker=SimpleNamespace(
            scores=SimpleNamespace(smoothed=9.0), record=SimpleNamespace(eval_reward=None)
        ),
        learner=learner,
        rng="rng",
        average=None,
        actor=None,
        holds_greedy=False,
        held_score=None,
    )
    run.choose_acting = lambda: Run.choose_acting(run)
    run.decay_progress = lambda: Run.decay_progress(run)
    run.schedule_score = lambda: Run.schedule_score(run)
    Run.learn(run, "rollout")
    ((source, progress, rng, share, eps, lam),) = calls
    assert (source, rng, lam) == ("rollout", "rng", 0.8)  # a smoothed 9: still the take-off's
    assert progress == pytest.approx(0.4) and share == pytest.approx(0.625)
    assert eps == pytest.approx(adam_eps(preset, 9.0)) and eps > preset.dqn.adam_eps
    assert Run.learning_rate.fget(run) == pytest.approx(preset.dqn.learning_rate * 0.6)
    # with pqn.follow_greedy (and learning on: no pqn.hold_at_greedy), a greedy
    # evaluation at 18 gives the updates their share at 18
    follow = ["pqn.follow_greedy=true", "pqn.hold_at_greedy=false", "eval.every=100000"]
    run.preset = load_preset("pong-fast", [*overrides, *follow])
    run.tracker.record.eval_reward = 19.0
    calls.clear()
    Run.learn(run, "rollout")
    ((_, progress, _, share, eps, lam),) = calls
    assert progress == pytest.approx(0.8) and share == pytest.approx(0.25)
    assert eps == pytest.approx(1e-5) and lam == preset.pqn.q_lambda


def test_following_the_greedy_score_needs_evaluations():
    from atari_speed.core.errors import ConfigError

    # with either algorithm: DQN's epsilon follows the greedy score too
    for preset in ("pong-fast", "pong-fast-dqn"):
        with pytest.raises(ConfigError, match=r"follow_greedy = true with \[eval\] every = 0"):
            load_preset(preset, ["pqn.follow_greedy=true", "eval.every=0"])
        load_preset(preset, ["pqn.follow_greedy=true", "eval.every=100000"])


def test_only_pqn_holds_the_greedy_agent():
    # DQN's loops count the SGD updates due per agent step: held, they would pile up
    from types import SimpleNamespace

    from atari_speed.core.errors import ConfigError
    from atari_speed.run.session import Run

    overrides = ["pqn.follow_greedy=true", "pqn.hold_at_greedy=true", "eval.every=100000"]
    with pytest.raises(ConfigError, match=r"hold_at_greedy = true with \[dqn\] algorithm"):
        load_preset("pong-fast-dqn", overrides)
    both = r"act_with_average = true and hold_at_greedy = true with \[dqn\].*PQN's only"
    with pytest.raises(ConfigError, match=both):
        load_preset("pong-fast-dqn", [*overrides, "pqn.act_with_average=true"])
    pqn = load_preset("pong-fast", overrides)
    # a DQN preset built past the check (as a test can) is not held either
    dqn = dataclasses.replace(pqn, dqn=dataclasses.replace(pqn.dqn, algorithm="dqn"))
    for preset, held in ((pqn, True), (dqn, False)):
        record = SimpleNamespace(eval_reward=18.5)
        run = SimpleNamespace(preset=preset, tracker=SimpleNamespace(record=record))
        assert Run.holds_greedy.fget(run) is held, preset.dqn.algorithm
        record.eval_reward = 17.5
        assert Run.holds_greedy.fget(run) is False, preset.dqn.algorithm
    # pqn.follow_margin: an agent at 18.5 is not held with a margin of 1, one at 19.5 is
    run = SimpleNamespace(
        preset=load_preset("pong-fast", [*overrides, "pqn.follow_margin=1.0"]),
        tracker=SimpleNamespace(record=SimpleNamespace(eval_reward=18.5)),
    )
    assert Run.holds_greedy.fget(run) is False
    run.tracker.record.eval_reward = 19.5
    assert Run.holds_greedy.fget(run) is True
    # pong-fast's own margin: an evaluation of exactly 18 is its agent's expected score, so
    # holding it would leave the book's smoothed score at 18 by chance; 18.25 is held
    run.preset = load_preset("pong-fast")
    run.tracker.record.eval_reward = 18.0
    assert Run.holds_greedy.fget(run) is False
    run.tracker.record.eval_reward = 18.25
    assert Run.holds_greedy.fget(run) is True


def test_a_follow_margin_above_the_most_a_game_can_score_is_refused():
    from atari_speed.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"follow_margin = 4 .* above \[eval\] max_game_score"):
        load_preset("pong-fast", ["pqn.follow_margin=4.0"])  # 18 + 4 > 21
    load_preset("pong-fast", ["pqn.follow_margin=3.0"])
    load_preset("pong-fast", ["pqn.follow_margin=4.0", "pqn.follow_greedy=false"])
    dqn_follows = ["pqn.follow_greedy=true", "eval.every=100000", "eval.max_game_score=21.0"]
    with pytest.raises(ConfigError, match=r"follow_margin = 4 .* above \[eval\] max_game_score"):
        load_preset("pong-fast-dqn", [*dqn_follows, "pqn.follow_margin=4.0"])
    load_preset("pong-fast-dqn", [*dqn_follows, "pqn.follow_margin=3.0"])


def test_per_actor_fixed_epsilons():
    spread = ExploreConfig(actor_base=0.4)
    eps = [actor_epsilon(spread, i, 4) for i in range(4)]
    assert eps == pytest.approx([0.4, 0.4 ** (1 + 7 / 3), 0.4 ** (1 + 14 / 3), 0.4**8])
    assert actor_epsilon(spread, 0, 1) == 0.4
    assert actor_epsilon(ExploreConfig(), 2, 4) is None  # follows the schedule


def test_one_update_per_train_every_frames_after_the_warm_up():
    schedule = UpdateSchedule(train_every=3, initial=200, batch=32)
    assert [schedule.due(f) for f in (0, 200, 202, 203, 205, 206, 600)] == [0, 0, 0, 1, 1, 2, 133]


@pytest.mark.parametrize(("train_every", "step"), [(1, 1), (4, 1), (2, 8), (16, 3)])
def test_actor_credits_never_deadlock(train_every, step):
    # Actors take one credit a frame, in whole steps of `step` frames; the learner returns
    # train_every credits per update it makes, when one is due. Whatever the ratio, some
    # side can always move, and actors never get further ahead than their credits.
    schedule = UpdateSchedule(train_every=train_every, initial=50, batch=32)
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
    schedule = UpdateSchedule(train_every=1, initial=200, batch=32)
    assert [schedule.due(f) for f in (0, 199, 200, 201, 250)] == [0, 0, 0, 1, 50]


def test_actor_credits_are_the_warm_up_left_plus_the_lead():
    schedule = UpdateSchedule(train_every=3, initial=50, batch=32)
    assert schedule.actor_credits(4) == 50 + 2 * 4 + 3
    # a resumed replay that restored 30 transitions needs 20 more before learning
    assert schedule.actor_credits(4, restored=30) == 20 + 2 * 4 + 3
    # one that restored more than the warm-up needs none: the lead alone
    assert schedule.actor_credits(4, restored=80) == 2 * 4 + 3


def test_a_rollout_schedule_samples_every_transition_once_an_epoch():
    schedule = RolloutSchedule(transitions=12, epochs=2, minibatches=3)
    batches = list(schedule.minibatch_indices(np.random.default_rng(0)))
    assert len(batches) == schedule.updates == 6
    assert all(len(b) == schedule.batch == 4 for b in batches)
    for epoch in (batches[:3], batches[3:]):
        assert sorted(np.concatenate(epoch)) == list(range(12))
    assert not np.array_equal(np.concatenate(batches[:3]), np.concatenate(batches[3:]))
    assert schedule.updates_per_frame == 6 / 12


def test_fewer_updates_cut_the_last_epoch_short_with_the_same_draws():
    rng, expected = np.random.default_rng(3), np.random.default_rng(3)
    schedule = RolloutSchedule(transitions=12, epochs=4, minibatches=3)  # 4 a minibatch
    assert schedule.updates_at(0.5) == 6 and schedule.updates_at(0.4) == 5
    assert schedule.updates_at(0.01) == 1 and schedule.updates_at(1.0) == 12
    batches = list(schedule.minibatch_indices(rng, updates=5))
    assert len(batches) == 5 and all(len(b) == 4 for b in batches)
    first, second = expected.permutation(12), expected.permutation(12)
    assert np.array_equal(np.concatenate(batches), np.concatenate([first, second[:8]]))
    # all of them: the same batches as the default
    full = list(RolloutSchedule(12, 4, 3).minibatch_indices(np.random.default_rng(3), 12))
    default = list(RolloutSchedule(12, 4, 3).minibatch_indices(np.random.default_rng(3)))
    assert all(np.array_equal(a, b) for a, b in zip(full, default, strict=True))


def test_the_update_share_follows_the_smoothed_score_like_the_learning_rate():
    preset = load_preset(
        "pong-fast",
        ["run.stop_reward=18.0", "pqn.updates_at_stop=0.25", "pqn.updates_score_from=0.0"],
    )
    assert update_share(preset, 0, None) == 1.0  # no game yet
    assert update_share(preset, 0, -20.0) == 1.0  # below lr_score_from
    assert update_share(preset, 0, 9.0) == pytest.approx(0.625)  # half way to stop_reward
    assert update_share(preset, 0, 30.0) == pytest.approx(0.25)  # never below updates_at_stop
    off = load_preset("pong-fast", ["pqn.updates_at_stop=1.0"])
    assert update_share(off, 0, 17.0) == 1.0
    # its own start: the learning rate's (pqn.lr_score_from) is not the updates'
    late = load_preset("pong-fast", ["pqn.updates_at_stop=0.25", "pqn.updates_score_from=12.0"])
    assert update_share(late, 0, 9.0) == 1.0 and update_share(late, 0, 15.0) == pytest.approx(0.625)
    assert lr_factor(late, 0, 9.0) != 1.0  # the preset's rate falls from 0
    from atari_speed.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"updates_at_stop = 0.5 with \[run\] stop_reward = inf"):
        load_preset("atari-fast", ["pqn.updates_at_stop=0.5"])
    with pytest.raises(ConfigError, match=r"updates_score_from = 18 is not below"):
        load_preset("pong-fast", ["pqn.updates_at_stop=0.5", "pqn.updates_score_from=18.0"])


def test_the_update_share_rises_with_the_agent_steps_while_epsilon_falls():
    preset = load_preset(
        "pong-fast",
        [
            "explore.epsilon_steps=1000",
            "pqn.updates_at_start=0.25",
            "pqn.updates_at_stop=0.5",
            "run.stop_reward=18.0",
            "pqn.updates_score_from=0.0",
        ],
    )
    assert update_share(preset, 0, None) == pytest.approx(0.25)  # at agent step 0
    assert update_share(preset, 500, None) == pytest.approx(0.625)  # half way up
    assert update_share(preset, 1000, None) == 1.0  # all of them once epsilon is down
    assert update_share(preset, 5000, -20.0) == 1.0  # and after, below the score's fall
    assert update_share(preset, 500, 9.0) == pytest.approx(0.625 * 0.75)  # the two multiply
    assert update_share(preset, 5000, 30.0) == pytest.approx(0.5)
    updates = RolloutSchedule(64 * 32, 8, 8)
    assert updates.updates_at(update_share(preset, 0, None)) == 16  # of 64
    more = load_preset("pong-fast", ["explore.epsilon_steps=1000", "pqn.updates_at_start=2.0"])
    assert update_share(more, 250, None) == pytest.approx(1.75)  # above 1: more epochs
    assert updates.updates_at(update_share(more, 0, None)) == 128
    twice = list(RolloutSchedule(12, 2, 3).minibatch_indices(np.random.default_rng(0), 12))
    assert len(twice) == 12 and all(len(m) == 4 for m in twice)  # four passes, not two
    assert all(sorted(np.concatenate(twice[k : k + 3])) == list(range(12)) for k in (0, 6, 9))
    unset = load_preset("pong-fast", ["explore.epsilon_steps=1000"])
    assert update_share(unset, 0, None) == 1.0  # the default: all from the start


def test_adams_epsilon_rises_with_the_smoothed_score_over_the_learning_rates_fall():
    preset = load_preset("pong-fast", ["run.stop_reward=18.0", "pqn.adam_eps_at_stop=1e-5"])
    start = preset.dqn.adam_eps
    assert adam_eps(preset, None) == start  # no game yet
    assert adam_eps(preset, -20.0) == start  # below pqn.lr_score_from (0)
    assert adam_eps(preset, 9.0) == pytest.approx((start + 1e-5) / 2)  # half way
    assert adam_eps(preset, 30.0) == pytest.approx(1e-5)  # never past its value at stop
    assert adam_eps(preset, 4.5) < adam_eps(preset, 9.0)  # and back down as the score falls
    off = load_preset("pong-fast", ["dqn.adam_eps=1e-6"])
    assert adam_eps(off, 17.0) == 1e-6  # 0: the score does not set it
    from atari_speed.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"adam_eps_at_stop = 1e-05 with \[run\] stop_reward"):
        load_preset("atari-fast", ["pqn.adam_eps_at_stop=1e-5"])


def test_a_rollout_schedule_draws_a_shuffle_per_epoch_as_it_begins():
    # the learner's RNG sees the same draws as a permutation per epoch, in turn
    rng, expected = np.random.default_rng(7), np.random.default_rng(7)
    schedule = RolloutSchedule(transitions=10, epochs=3, minibatches=2)  # 5 a minibatch
    got = np.concatenate(list(schedule.minibatch_indices(rng)))
    assert np.array_equal(got, np.concatenate([expected.permutation(10) for _ in range(3)]))


def test_the_preset_picks_its_schedule_and_its_update_to_data():
    dqn = load_preset("pong-nenv")
    schedule = update_schedule(dqn, envs=8)
    assert schedule == UpdateSchedule(dqn.dqn.train_every, dqn.replay.initial, dqn.dqn.batch_size)
    assert schedule.update_to_data() == {
        "batch_size": 96,
        "train_every": 3,
        "samples_per_frame": 32.0,
    }
    assert schedule.updates_per_frame == 1 / 3
    pqn = load_preset("pong-pqn")  # 32 steps, 2 epochs x 8 minibatches
    schedule = update_schedule(pqn, envs=4)
    assert schedule == RolloutSchedule(4 * 32, 2, 8)
    assert schedule.update_to_data() == {
        "rollout": 128,
        "minibatch": 16,
        "epochs": 2,
        "samples_per_frame": 2.0,
    }


def test_the_take_off_lambda_holds_below_its_score_and_the_published_one_from_it():
    preset = load_preset(
        "pong-fast",
        ["pqn.q_lambda=0.65", "pqn.q_lambda_take_off=0.8", "pqn.q_lambda_score_from=0.0"],
    )
    assert q_lambda(preset, None) == 0.8  # no game has ended
    assert q_lambda(preset, -20.0) == 0.8
    assert q_lambda(preset, -0.01) == 0.8
    assert q_lambda(preset, 0.0) == 0.65
    assert q_lambda(preset, 15.0) == 0.65
    assert q_lambda(preset, -3.0) == 0.8  # both ways: a score that falls back gets it back
    zero = load_preset("pong-fast", ["pqn.q_lambda_take_off=0.0"])
    assert q_lambda(zero, -20.0) == 0.0  # 0 is a lambda (one-step returns), not "off"
    off = load_preset("pong-fast", ["pqn.q_lambda=0.7"])  # the default: off
    assert q_lambda(off, None) == 0.7 and q_lambda(off, -20.0) == 0.7
    from atari_speed.core.errors import ConfigError

    with pytest.raises(ConfigError, match="q_lambda_take_off"):
        load_preset("pong-fast", ["pqn.q_lambda_take_off=1.5"])
