"""PQN's rollout store and its Q(lambda) returns, worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from atari_speed.agent.rollout import RolloutStore, q_lambda_returns


def test_q_lambda_returns_on_a_hand_worked_rollout():
    # gamma = lambda = 0.5; three envs over four steps.
    # env 0 terminates at t=1; env 1 is truncated at t=2 (its final observation is worth
    # 100); env 2 terminates at t=2, and the return of t=3, another episode's, must not
    # leak into t=2 through the lambda term.
    rewards = np.array([[1, 1, 0], [2, 1, 0], [3, 1, 5], [4, 1, 7]], np.float32)
    terminated = np.zeros((4, 3), bool)
    truncated = np.zeros((4, 3), bool)
    terminated[1, 0] = terminated[2, 2] = True
    truncated[2, 1] = True
    next_values = np.array([[10, 10, 1], [20, 20, 1], [30, 30, 1], [40, 40, 1]], np.float32)
    final_values = np.zeros((4, 3), np.float32)
    final_values[2, 1] = 100
    got = q_lambda_returns(rewards, terminated, truncated, next_values, final_values, 0.5, 0.5)
    expected = [
        [
            4.0,
            2.0,
            16.5,
            24.0,
        ],  # G3 = 4 + 40/2; G2 = 3 + (24/2 + 30/2)/2; G1 = 2; G0 = 1 + (2/2 + 10/2)/2
        [8.1875, 18.75, 51.0, 21.0],  # G2 = 1 + 100/2, cut from G3
        [0.625, 1.5, 5.0, 7.5],  # G2 = 5, not 5 + (7.5/2)/2
    ]
    assert pytest.approx(np.array(expected)) == got.T


def test_lambda_zero_is_one_step_and_one_is_monte_carlo():
    rewards = np.array([[1.0], [2.0], [3.0]], np.float32)
    none = np.zeros((3, 1), bool)
    values = np.array([[5.0], [6.0], [7.0]], np.float32)
    zeros = np.zeros((3, 1), np.float32)
    one_step = q_lambda_returns(rewards, none, none, values, zeros, 0.9, 0.0)
    assert one_step[:, 0] == pytest.approx([1 + 0.9 * 5, 2 + 0.9 * 6, 3 + 0.9 * 7])
    monte_carlo = q_lambda_returns(rewards, none, none, values, zeros, 0.9, 1.0)
    assert monte_carlo[0, 0] == pytest.approx(1 + 0.9 * 2 + 0.81 * 3 + 0.729 * 7)


def test_rollout_store_keeps_whole_observations_and_final_ones():
    store = RolloutStore(2, 3, (2, 1, 1))
    for t in range(3):
        store.put_obs(np.full((2, 2, 1, 1), t, np.uint8))
        truncated = np.array([t == 1, False])
        final = np.full((2, 2, 1, 1), 50 + t, np.uint8)
        store.commit(
            np.array([t, t]),
            np.ones(2),
            np.array([False, t == 2]),
            truncated=truncated,
            final_obs=final,
        )
    assert store.full and store.obs[2, 1, 0, 0, 0] == 2
    assert store.truncated.tolist() == [[False, False], [True, False], [False, False]]
    assert store.terminated[2, 1] and store.final_obs[1, 0, 0, 0, 0] == 51
    with pytest.raises(ValueError, match=r"^the rollout is full: learn on it, then clear\(\) it$"):
        store.put_obs(np.zeros((2, 2, 1, 1), np.uint8))
    store.clear()
    assert not store.full and store.t == 0
    for _ in range(3):  # room for exactly `steps` rows again
        store.put_obs(np.zeros((2, 2, 1, 1), np.uint8))
        store.commit(np.zeros(2), np.ones(2), np.zeros(2, bool))
    assert store.full


def test_acted_values_are_there_only_when_every_row_after_the_first_has_them():
    store = RolloutStore(2, 3, (1, 1, 1))
    store.put_obs(np.zeros((2, 1, 1, 1), np.uint8))  # a warm-up row: row 0 needs none
    store.commit(np.zeros(2), np.zeros(2), np.zeros(2, bool))
    for t in (1, 2):
        store.put_obs(np.zeros((2, 1, 1, 1), np.uint8), values=np.array([t, -t], np.float32))
        store.commit(np.zeros(2), np.zeros(2), np.zeros(2, bool))
    assert store.acted_values().tolist() == [[1, -1], [2, -2]]
    store.clear()
    store.put_obs(np.zeros((2, 1, 1, 1), np.uint8), values=np.ones(2, np.float32))
    store.commit(np.zeros(2), np.zeros(2), np.zeros(2, bool))
    store.put_obs(np.zeros((2, 1, 1, 1), np.uint8))  # a row without: none are used
    store.commit(np.zeros(2), np.zeros(2), np.zeros(2, bool))
    assert store.acted_values() is None


def test_a_truncation_without_final_observation_terminates():
    store = RolloutStore(1, 1, (1, 1, 1))
    store.put_obs(np.zeros((1, 1, 1, 1), np.uint8))
    store.commit(np.zeros(1), np.zeros(1), np.array([False]), truncated=np.array([True]))
    assert store.terminated[0, 0] and not store.truncated[0, 0]


def test_a_rollout_over_a_shared_buffer_is_seen_by_every_view_of_it():
    buffer = bytearray(RolloutStore.nbytes(4, 2, (1, 1, 1)))
    writer, reader = RolloutStore(4, 2, (1, 1, 1), buffer), RolloutStore(4, 2, (1, 1, 1), buffer)
    cols = slice(2, 4)  # this writer's envs: an actor process owns some columns
    for t in range(2):
        writer.put_obs(np.full((2, 1, 1, 1), 10 + t, np.uint8), cols)
        writer.commit(np.array([1, 2]), np.array([0.5, -1.0]), np.array([False, t == 1]), cols=cols)
    with pytest.raises(ValueError, match="fill it first"):
        reader.finish(np.zeros((4, 1, 1, 1), np.uint8))
    writer.finish(np.full((2, 1, 1, 1), 99, np.uint8), cols)
    assert reader.obs[:, :, 0, 0, 0].tolist() == [[0, 0, 10, 10], [0, 0, 11, 11]]
    assert reader.next_obs[:, 0, 0, 0].tolist() == [0, 0, 99, 99]
    assert reader.actions[1].tolist() == [0, 0, 1, 2] and reader.terminated[1, 3]
    assert reader.t == 0  # rows written are each view's own count


def test_a_sent_rollout_written_into_columns_equals_one_filled_there():
    # A Ray actor sends its envs' rollout; the learner writes it into those columns of its
    # own. That must be the rollout the actor would have filled there itself, truncations
    # and their final observations included.
    rng = np.random.default_rng(3)
    direct, part = RolloutStore(5, 4, (2, 1, 1)), RolloutStore(2, 4, (2, 1, 1))
    cols = slice(3, 5)
    for t in range(4):
        obs = rng.integers(0, 255, (2, 2, 1, 1), np.uint8)
        step = dict(
            actions=rng.integers(0, 6, 2),
            rewards=rng.normal(size=2).astype(np.float32),
            terminated=np.array([t == 2, False]),
            truncated=np.array([t == 1, t == 1]),
            final_obs=rng.integers(0, 255, (2, 2, 1, 1), np.uint8),
        )
        direct.put_obs(obs, cols)
        part.put_obs(obs)
        direct.commit(**step, cols=cols)
        part.commit(**step)
    after = rng.integers(0, 255, (2, 2, 1, 1), np.uint8)
    direct.finish(after, cols)
    part.finish(after)
    sent = part.send()
    assert len(sent["finals"]) == 2  # only the truncated steps' final observations travel
    assembled = RolloutStore(5, 4, (2, 1, 1))
    assembled.put_columns(sent, cols)
    assert assembled.full
    for name in ("obs", "final_obs", "next_obs", "actions", "rewards", "terminated", "truncated"):
        assert np.array_equal(getattr(assembled, name), getattr(direct, name)), name


def test_q_lambda_returns_when_the_last_row_ends_episodes():
    # gamma = 0.5, lambda = 0.5; two steps, three envs. On the last row env 0 terminates,
    # env 1 is truncated (its final observation worth 100), env 2 goes on. next_values of
    # the last row is the observation after the rollout: for envs 0 and 1 that is the
    # first observation of a new episode (worth 1000 here), which neither may see.
    rewards = np.array([[1, 1, 1], [2, 2, 2]], np.float32)
    terminated = np.array([[False, False, False], [True, False, False]])
    truncated = np.array([[False, False, False], [False, True, False]])
    next_values = np.array([[10, 10, 10], [1000, 1000, 40]], np.float32)
    final_values = np.array([[0, 0, 0], [0, 100, 0]], np.float32)
    got = q_lambda_returns(rewards, terminated, truncated, next_values, final_values, 0.5, 0.5)
    # G1: 2 | 2 + 100/2 = 52 | 2 + 40/2 = 22
    # G0 = 1 + 0.5 * (0.5 * G1 + 0.5 * 10)
    assert got[1].tolist() == pytest.approx([2.0, 52.0, 22.0])
    assert got[0].tolist() == pytest.approx(
        [1 + 0.5 * (1 + 5), 1 + 0.5 * (26 + 5), 1 + 0.5 * (11 + 5)]
    )


def test_a_store_whose_last_row_ends_episodes_gives_those_returns():
    # The same through RolloutStore: the truncated env's final observation is kept at the
    # last row, and the terminated one keeps none.
    store = RolloutStore(3, 2, (1, 1, 1))
    store.put_obs(np.zeros((3, 1, 1, 1), np.uint8))
    store.commit(np.zeros(3), np.ones(3), np.zeros(3, bool))
    store.put_obs(np.ones((3, 1, 1, 1), np.uint8))
    final = np.full((3, 1, 1, 1), 7, np.uint8)
    store.commit(
        np.zeros(3),
        np.full(3, 2.0),
        np.array([True, False, False]),
        truncated=np.array([True, True, False]),  # terminated wins over truncated
        final_obs=final,
    )
    store.finish(np.full((3, 1, 1, 1), 9, np.uint8))
    assert store.terminated[1].tolist() == [True, False, False]
    assert store.truncated[1].tolist() == [False, True, False]
    assert store.final_obs[1, :, 0, 0, 0].tolist() == [0, 7, 0]
    assert store.next_obs[:, 0, 0, 0].tolist() == [9, 9, 9]


def test_q_lambda_returns_are_float32_whatever_the_inputs():
    # the learner's targets, beside the network's float32 Q-values
    ones = np.ones((2, 1))  # float64
    none = np.zeros((2, 1), bool)
    got = q_lambda_returns(ones, none, none, ones, ones, 0.5, 0.5)
    assert got.dtype == np.float32 and got[:, 0].tolist() == [1 + 0.5 * (0.5 * 1.5 + 0.5 * 1), 1.5]


def test_acted_values_wait_for_the_last_row_to_be_committed():
    # Every row's values are there once the last row's observation is put, but the
    # rollout is not full until that row is committed: no values are taken from it yet.
    store = RolloutStore(1, 2, (1, 1, 1))
    for t in range(2):
        store.put_obs(np.zeros((1, 1, 1, 1), np.uint8), values=np.array([t], np.float32))
        if t == 0:
            store.commit(np.zeros(1), np.zeros(1), np.zeros(1, bool))
    assert store.acted_values() is None
    store.commit(np.zeros(1), np.zeros(1), np.zeros(1, bool))
    values = store.acted_values()
    assert values.tolist() == [[1.0]] and values.dtype == np.float32  # the network's
