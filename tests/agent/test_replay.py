"""FrameReplay against a naive reference that keeps every full observation."""

from __future__ import annotations

import numpy as np
import pytest

from atari_speed.agent.replay import Batch, FrameReplay


def stream(num_envs, steps, k, rng, frame=(1, 3, 2), mean_episode=6):
    """What a vector env with FrameStack(k) shows: (obs, actions, rewards, ends) per step."""
    stacks = [np.zeros((k, *frame), np.uint8) for _ in range(num_envs)]
    new = [True] * num_envs
    for _ in range(steps):
        obs = np.empty((num_envs, k * frame[0], *frame[1:]), np.uint8)
        for e in range(num_envs):
            if new[e]:
                stacks[e][:] = 0
            stacks[e] = np.roll(stacks[e], -1, axis=0)
            stacks[e][-1] = rng.integers(1, 256, frame)
            obs[e] = stacks[e].reshape(obs.shape[1:])
        actions = rng.integers(0, 6, num_envs)
        rewards = rng.normal(size=num_envs).astype(np.float32)
        ends = rng.random(num_envs) < 1 / mean_episode
        new = list(ends)
        yield obs, actions, rewards, ends


@pytest.mark.parametrize(
    ("num_envs", "k", "n_steps", "capacity"),
    [(1, 4, 1, 60), (3, 4, 3, 90), (4, 2, 1, 40), (2, 4, 5, 200)],
)
def test_samples_match_the_naive_reference(num_envs, k, n_steps, capacity):
    rng = np.random.default_rng(0)
    gamma = 0.9
    replay = FrameReplay(capacity, num_envs, (1, 3, 2), k, n_steps=n_steps, gamma=gamma)
    log = []  # log[t] = (obs, actions, rewards, ends) of every env
    for t, (obs, actions, rewards, ends) in enumerate(stream(num_envs, 150, k, rng)):
        replay.put_obs(obs)
        replay.commit(actions, rewards, ends)
        log.append((obs.copy(), actions, rewards, ends))
        if t < k + n_steps + 2:
            continue
        batch = replay.sample(16, rng)
        for b in range(16):
            e, j = int(batch.env[b]), int(batch.step[b])
            assert j <= t - n_steps and j > t - replay.rows, "only live, complete rows"
            assert np.array_equal(batch.states[b], log[j][0][e])
            assert batch.actions[b] == log[j][1][e]
            ret, done = 0.0, False
            for i in range(n_steps):
                ret += gamma**i * log[j + i][2][e]
                if log[j + i][3][e]:
                    done = True
                    break
            assert batch.discounts[b] == pytest.approx(0.0 if done else gamma**n_steps)
            assert batch.returns[b] == pytest.approx(ret, rel=1e-5, abs=1e-5)
            if not done:
                assert np.array_equal(batch.next_states[b], log[j + n_steps][0][e])
    assert len(replay) == replay.rows * num_envs, "the ring wrapped around"


def test_columns_written_separately_stay_consistent():
    # Two actors owning columns 0-1 and 2-3 write at different rates (parallel mode).
    rng = np.random.default_rng(1)
    replay = FrameReplay(400, 4, (1, 3, 2), 4, n_steps=2, gamma=0.5)
    streams = [stream(2, 200, 4, rng), stream(2, 60, 4, rng)]
    logs = [[], []]
    for t in range(200):
        for a, cols in enumerate((slice(0, 2), slice(2, 4))):
            if a == 1 and t % 3:
                continue
            step = next(streams[a], None)
            if step is None:
                continue
            obs, actions, rewards, ends = step
            replay.put_obs(obs, cols)
            replay.commit(actions, rewards, ends, cols=cols)
            logs[a].append(obs.copy())
    batch = replay.sample(200, rng)
    for b in range(200):
        e, j = int(batch.env[b]), int(batch.step[b])
        assert np.array_equal(batch.states[b], logs[e // 2][j][e % 2])
    assert set(batch.env.tolist()) == {0, 1, 2, 3}


def test_empty_buffer_says_so():
    replay = FrameReplay(100, 2, (1, 3, 2), 4)
    with pytest.raises(ValueError, match="no complete transition"):
        replay.sample(4, np.random.default_rng(0))


def test_pong_sized_buffer_stores_each_frame_once():
    # 1M transitions of 84x84 frames: ~7.06 GB, the frames and nothing per-transition big.
    nbytes = FrameReplay.nbytes(1_000_000, 4, (1, 84, 84), 4, 3)
    assert 7.05e9 < nbytes < 7.2e9


def test_truncated_episodes_bootstrap_from_their_final_observation():
    # One env, 2-frame stacks of 1x1 frames named by their value, 2-step returns, every
    # reward 1. Episode A (frames 1, 2, 3) is truncated after its third step, its final
    # observation ending in frame 4; episode B (11, 12, 13) terminates after its third.
    gamma = 0.5
    replay = FrameReplay(100, 1, (1, 1, 1), 2, n_steps=2, gamma=gamma)

    def obs(older: int, newer: int) -> np.ndarray:
        return np.array([older, newer], np.uint8).reshape(1, 2, 1, 1)

    steps = [  # (observation, terminated, truncated, final observation)
        (obs(0, 1), False, False, None),
        (obs(1, 2), False, False, None),
        (obs(2, 3), False, True, obs(3, 4)),
        (obs(0, 11), False, False, None),
        (obs(11, 12), False, False, None),
        (obs(12, 13), True, False, None),
        (obs(0, 21), False, False, None),
        (obs(21, 22), False, False, None),
        (obs(22, 23), False, False, None),
    ]
    for o, terminated, truncated, final in steps:
        replay.put_obs(o)
        replay.commit(
            np.zeros(1, np.int64),
            np.ones(1, np.float32),
            np.array([terminated]),
            truncated=np.array([truncated]),
            final_obs=final,
        )
    expected = {  # newest frame of the state -> (return, discount, next state)
        1: (1 + gamma, gamma**2, (2, 3)),
        2: (1 + gamma, gamma**2, (3, 4)),  # bootstraps from A's final observation
        3: (1.0, gamma, (3, 4)),
        11: (1 + gamma, gamma**2, (12, 13)),
        12: (1 + gamma, 0.0, None),  # terminated within the window: no bootstrap
        13: (1.0, 0.0, None),
        21: (1 + gamma, gamma**2, (22, 23)),  # the last row has no 2-step successor yet
    }
    batch = replay.sample(400, np.random.default_rng(0))
    seen = set()
    for b in range(400):
        newest = int(batch.states[b, -1, 0, 0])
        assert newest in expected, f"state ending in {newest} is no transition (a tail row?)"
        ret, discount, nxt = expected[newest]
        assert batch.returns[b] == pytest.approx(ret)
        assert batch.discounts[b] == pytest.approx(discount)
        if nxt is not None:
            assert tuple(batch.next_states[b, :, 0, 0]) == nxt
        seen.add(newest)
    assert seen == set(expected)
    assert tuple(batch.states[list(batch.states[:, -1, 0, 0]).index(11), :, 0, 0]) == (0, 11)


def test_end_open_episodes_cuts_the_open_games_of_every_column_and_only_those():
    # Four columns, written through column slices as actors write them:
    # 0 never written; 1 one step into a game; 2 a game that ended on its last step;
    # 3 a game that ended, then one step into the next (its last row starts that game).
    replay = FrameReplay(40, 4, (1, 3, 2), 4, n_steps=1, gamma=0.9)

    def step(cols: slice, value: int, terminated: list[bool]) -> None:
        n = len(terminated)
        replay.put_obs(np.full((n, 4, 3, 2), value, np.uint8), cols)
        replay.commit(np.full(n, 5), np.ones(n, np.float32), np.array(terminated), cols=cols)

    step(slice(1, 4), 1, [False, False, True])
    step(slice(2, 4), 2, [True, False])
    names = ("actions", "rewards", "ends", "terminal", "tail", "first")
    before = {name: getattr(replay, name).copy() for name in names}
    replay.end_open_episodes()
    changed = {
        (name, int(row), int(col))
        for name in names
        for row, col in zip(*np.nonzero(getattr(replay, name) != before[name]), strict=True)
    }
    # column 1's row 0 and column 3's row 1 become their games' final frames (tails);
    # nothing else changes: not the empty column, not the ended game, and not the end of
    # column 3's previous game, which terminated and must stay terminal
    cut = {("actions", 0, 1), ("rewards", 0, 1), ("actions", 1, 3), ("rewards", 1, 3)}
    cut |= {(flag, 0, 1) for flag in ("ends", "terminal", "tail")}
    cut |= {(flag, 1, 3) for flag in ("ends", "terminal", "tail")}
    assert changed == cut
    assert replay.terminal[0, 3] and replay.pending_first.all()


def step(replay: FrameReplay, obs: np.ndarray, reward: float = 0.0) -> None:
    """One step of every env: observations ``obs``, action 0, ``reward`` each, no end."""
    n = len(obs)
    replay.put_obs(obs)
    replay.commit(np.zeros(n, np.int64), np.full(n, reward, np.float32), np.zeros(n, bool))


def test_an_empty_batch_has_the_dtypes_the_learner_reads():
    # uint8 frames (normalised by the network), int64 actions (torch's gather index) and
    # float32 returns and discounts (beside the network's float32 Q-values)
    batch = Batch.empty(3, (2, 4, 5))
    assert batch.states.shape == batch.next_states.shape == (3, 2, 4, 5)
    assert batch.states.dtype == batch.next_states.dtype == np.uint8
    assert batch.actions.shape == batch.returns.shape == batch.discounts.shape == (3,)
    assert batch.actions.dtype == np.int64
    assert batch.returns.dtype == batch.discounts.dtype == np.float32


def test_a_replay_made_with_the_defaults_samples_one_step_transitions_discounted_by_099():
    replay = FrameReplay(40, 1, (1, 1, 1), 1)
    assert replay.capacity == 40  # what a saved replay file records
    for t in range(12):  # one long episode, reward t after step t
        step(replay, np.full((1, 1, 1, 1), t, np.uint8), reward=t)
    batch = replay.sample(32, np.random.default_rng(0))
    # one step: the return is that step's reward, the state's own pixel, and the next
    # state is the next frame
    assert batch.returns.tolist() == batch.states[:, 0, 0, 0].astype(np.float32).tolist()
    assert (batch.next_states[:, 0, 0, 0] == batch.states[:, 0, 0, 0] + 1).all()
    assert batch.discounts == pytest.approx(np.full(32, 0.99))


def test_a_new_replay_marks_each_columns_first_row_as_an_episode_start():
    # pending_first starts True (the default attach=False initialises it): the first row
    # written in every column begins an episode; a non-ending step does not begin the next
    replay = FrameReplay(40, 2, (1, 1, 1), 2)
    for _ in range(2):
        step(replay, np.ones((2, 2, 1, 1), np.uint8))
    assert replay.first[:2].tolist() == [[True, True], [False, False]]


def test_attaching_reads_the_buffer_as_it_is_and_a_new_replay_resets_it():
    buffer = bytearray(FrameReplay.nbytes(40, 2, (1, 1, 1), 2, 1))
    writer = FrameReplay(40, 2, (1, 1, 1), 2, buffer=buffer)
    writer.put_obs(np.full((2, 2, 1, 1), 7, np.uint8))
    writer.commit(np.zeros(2, np.int64), np.zeros(2, np.float32), np.array([False, True]))
    # the writer's game in column 0 goes on, column 1's ended: an attached reader sees that
    reader = FrameReplay(40, 2, (1, 1, 1), 2, buffer=buffer, attach=True)
    assert reader.pending_first.tolist() == [False, True]
    assert reader.written.tolist() == [1, 1] and reader.frames[0, 0, 0, 0, 0] == 7
    FrameReplay(40, 2, (1, 1, 1), 2, buffer=buffer)  # not attached: starts new games
    assert reader.pending_first.tolist() == [True, True]


def test_a_tiny_capacity_still_gets_rows_for_a_stack_the_look_ahead_and_the_margin():
    # k=4, n=3: 4 + 3 + 2 + MARGIN(4) = 13 rows, whatever the capacity asks for below that
    assert FrameReplay.rows_for(10, 5, 4, 3) == 13
    assert FrameReplay.rows_for(100, 2, 4, 3) == 50  # capacity // num_envs above it
    replay = FrameReplay(1, 1, (1, 1, 1), 4, n_steps=3)
    for t in range(30):
        step(replay, np.full((1, 4, 1, 1), t, np.uint8))
    # written 30: rows 30-13+3+4 = 24 .. 30-1-3 = 26 are sampleable
    assert {int(j) for j in replay.sample(64, np.random.default_rng(0)).step} == {24, 25, 26}


def test_sampleable_rows_leave_the_stack_the_margin_and_the_look_ahead():
    replay = FrameReplay(40, 2, (1, 1, 1), 4, n_steps=3)  # 20 rows per column
    replay.written[:] = [5, 30]
    low, high = replay.sampleable()
    # low: max(0, written - 20 + (k - 1) + MARGIN); high: written - 1 - n
    assert low.tolist() == [0, 17]
    assert high.tolist() == [1, 26]


def test_draws_cover_every_sampleable_row_and_nothing_else():
    # columns 0 (never written), 1 (2 steps: no 3-step transition yet), 2 and 3 written;
    # 1-frame stacks, 3-step returns, 20 rows a column
    replay = FrameReplay(80, 4, (1, 1, 1), 1, n_steps=3)
    replay.written[:] = [0, 2, 6, 30]
    # column 2: rows 0..2; column 3: rows max(0, 30 - 20 + 0 + 4) = 14 .. 26
    expected = {(2, j) for j in range(3)} | {(3, j) for j in range(14, 27)}
    batch = replay.sample(2000, np.random.default_rng(0))
    drawn = set(zip(batch.env.tolist(), batch.step.tolist(), strict=True))
    assert drawn == expected


def test_a_buffer_with_one_transition_samples_it():
    replay = FrameReplay(8, 1, (1, 1, 1), 1)
    for t in (3, 4):
        step(replay, np.full((1, 1, 1, 1), t, np.uint8), reward=1.0)
    batch = replay.sample(2, np.random.default_rng(0))
    assert batch.step.tolist() == [0, 0]
    assert batch.states[:, 0, 0, 0].tolist() == [3, 3]
    assert batch.next_states[:, 0, 0, 0].tolist() == [4, 4]


NO_TRANSITION = "^the replay buffer holds no complete transition yet$"


def test_sampling_an_empty_buffer_says_exactly_why():
    replay = FrameReplay(100, 2, (1, 3, 2), 4)
    with pytest.raises(ValueError, match=NO_TRANSITION):
        replay.sample(4, np.random.default_rng(0))


def test_sampling_when_every_sampleable_row_is_a_tail_says_exactly_why():
    # tail rows are no transition: after MAX_REDRAWS draws of nothing but tails, give up
    replay = FrameReplay(8, 1, (1, 1, 1), 1)
    for _ in range(4):
        step(replay, np.zeros((1, 1, 1, 1), np.uint8), reward=1.0)
    replay.tail[:] = True
    with pytest.raises(ValueError, match=NO_TRANSITION):
        replay.sample(4, np.random.default_rng(0))


def test_nbytes_sums_the_64_byte_aligned_arrays_of_the_layout():
    # 12 transitions over 2 columns would be 6 rows; k=1, n=1 need 1 + 1 + 2 + 4 = 8.
    # frames 8*2*(1*2*3) = 96 B -> 128; actions 16 int64 = 128; rewards 16 float32 = 64;
    # ends, terminal, tail, first 16 B -> 64 each; written 2 int64 -> 64; pending_first 64
    assert FrameReplay.nbytes(12, 2, (1, 2, 3), 1, 1) == 128 + 128 + 64 + 4 * 64 + 64 + 64


def test_arrays_are_the_saved_arrays_themselves_by_name():
    replay = FrameReplay(40, 2, (1, 1, 1), 2)
    arrays = replay.arrays()
    names = ["frames", "actions", "rewards", "ends", "terminal", "tail", "first", "written"]
    assert list(arrays) == names
    assert all(arrays[name] is getattr(replay, name) for name in names)


def test_commit_of_a_column_slice_records_truncations_terminations_both_and_neither():
    # Columns 1..4 written through one slice, column 0 never: 1 truncated (with a final
    # observation), 2 terminated, 3 both (a termination wins), 4 neither. 3-frame stacks
    # of 1x2x1 frames named by their value, 1-step returns, gamma 0.5, 10 rows a column.
    replay = FrameReplay(50, 5, (1, 2, 1), 3, n_steps=1, gamma=0.5)
    cols = slice(1, 5)

    def stack(*values):
        return np.array(values, np.uint8)[:, None, None] * np.ones((1, 2, 1), np.uint8)

    replay.put_obs(np.stack([stack(0, 0, v) for v in (10, 20, 30, 40)]), cols)
    replay.commit(
        np.array([1, 2, 3, 4]),
        np.array([1, 2, 3, 4], np.float32),
        np.array([False, True, True, False]),
        truncated=np.array([True, False, True, False]),
        final_obs=np.stack([stack(0, v, v + 1) for v in (10, 20, 30, 40)]),
        cols=cols,
    )
    # column 1: row 0 ends, not terminal; row 1 is the tail holding the final frame 11
    assert replay.written.tolist() == [0, 2, 1, 1, 1]
    assert replay.ends[:2].tolist() == [[0, 1, 1, 1, 0], [0, 1, 0, 0, 0]]
    assert replay.terminal[:2].tolist() == [[0, 0, 1, 1, 0], [0, 1, 0, 0, 0]]
    assert replay.tail[:2].tolist() == [[0, 0, 0, 0, 0], [0, 1, 0, 0, 0]]
    assert replay.first[:2].tolist() == [[0, 1, 1, 1, 1], [0, 0, 0, 0, 0]]
    assert replay.frames[:2, :, 0, 0, 0].tolist() == [[0, 10, 20, 30, 40], [0, 11, 0, 0, 0]]
    assert replay.actions[1, 1] == 0 and replay.rewards[1, 1] == 0.0
    assert replay.pending_first.tolist() == [True, True, True, True, False]
    for values in ((12, 22, 32, 41), (13, 23, 33, 42)):  # two more steps, no end
        new = [stack(0, 0, v) for v in values[:3]] + [stack(0, values[3] - 1, values[3])]
        replay.put_obs(np.stack(new), cols)
        replay.commit(
            np.array([5, 6, 7, 8]), np.array([5, 6, 7, 8], np.float32), np.zeros(4, bool), cols=cols
        )
    # (column, row) -> (state, action, return, discount, next state or None if terminal)
    expected = {
        (1, 0): ((0, 0, 10), 1, 1.0, 0.5, (0, 10, 11)),  # bootstraps from the final obs
        (1, 2): ((0, 0, 12), 5, 5.0, 0.5, (0, 12, 13)),  # row 1, the tail, is skipped
        (2, 0): ((0, 0, 20), 2, 2.0, 0.0, None),
        (2, 1): ((0, 0, 22), 6, 6.0, 0.5, (0, 22, 23)),
        (3, 0): ((0, 0, 30), 3, 3.0, 0.0, None),
        (3, 1): ((0, 0, 32), 7, 7.0, 0.5, (0, 32, 33)),
        (4, 0): ((0, 0, 40), 4, 4.0, 0.5, (0, 40, 41)),
        (4, 1): ((0, 40, 41), 8, 8.0, 0.5, (40, 41, 42)),
    }
    batch = replay.sample(300, np.random.default_rng(0))
    seen = set()
    for b in range(300):
        key = (int(batch.env[b]), int(batch.step[b]))
        state, action, ret, discount, nxt = expected[key]
        assert np.array_equal(batch.states[b], stack(*state))
        assert batch.actions[b] == action
        assert batch.returns[b] == ret and batch.discounts[b] == discount
        if nxt is not None:
            assert np.array_equal(batch.next_states[b], stack(*nxt))
        seen.add(key)
    assert seen == set(expected)


def test_a_truncation_without_a_final_observation_is_a_termination():
    replay = FrameReplay(40, 2, (1, 1, 1), 1)
    replay.put_obs(np.ones((2, 1, 1, 1), np.uint8))
    replay.commit(
        np.zeros(2, np.int64),
        np.ones(2, np.float32),
        np.array([False, False]),
        truncated=np.array([True, False]),
    )
    assert replay.written.tolist() == [1, 1]  # no tail row
    assert replay.ends[0].tolist() == [True, False]
    assert replay.terminal[0].tolist() == [True, False] and not replay.tail.any()


def test_end_open_episodes_of_a_long_game_bootstraps_its_second_last_row_from_its_last():
    # columns 0 and 1 in the 3rd step of a game (0 wrapped past its ring's end); only
    # column 0 is cut. 1-frame stacks, 10 rows a column.
    replay = FrameReplay(20, 2, (1, 1, 1), 1, n_steps=1)
    for t in range(13):
        ended = t == 9
        replay.put_obs(np.full((2, 1, 1, 1), t, np.uint8))
        replay.commit(np.full(2, 3), np.ones(2, np.float32), np.array([ended, ended]))
    replay.end_open_episodes(slice(0, 1))
    # written 13: rows 10, 11, 12 are ring rows 0, 1, 2; row 12 becomes the tail, row 11
    # ends there without terminating, row 10 is untouched
    assert replay.ends[:3, 0].tolist() == [False, True, True]
    assert replay.terminal[:3, 0].tolist() == [False, False, True]
    assert replay.tail[:3, 0].tolist() == [False, False, True]
    assert replay.actions[:3, 0].tolist() == [3, 3, 0]
    assert replay.rewards[:3, 0].tolist() == [1.0, 1.0, 0.0]
    assert not replay.ends[:3, 1].any() and not replay.tail[:, 1].any()
    assert replay.pending_first.tolist() == [True, False]


def stack(*frames: int) -> np.ndarray:
    """One observation of 1x1 frames, oldest first."""
    return np.array(frames, np.uint8).reshape(1, len(frames), 1, 1)


@pytest.mark.parametrize("backend", ["sync", "ale"])
def test_states_after_a_lost_life_are_the_stacks_the_actor_saw(backend):
    # With FrameStack's keep_across_lives (and always on ale) the stack goes on across a
    # lost life: the next episode's first states hold the frames before it, not zeros.
    # The pipeline backends' reset after the loss returns the final frame (9) and the one
    # after it (10) in one stack; ale returns the final frame as the next observation.
    replay = FrameReplay(64, 1, (1, 1, 1), 4, n_steps=1, gamma=0.5)
    seen = [stack(0, 0, 0, 5), stack(0, 0, 5, 6), stack(0, 5, 6, 7), stack(5, 6, 7, 8)]
    if backend == "sync":
        seen += [stack(7, 8, 9, 10), stack(8, 9, 10, 11), stack(9, 10, 11, 12)]
    else:
        seen += [stack(6, 7, 8, 9), stack(7, 8, 9, 10), stack(8, 9, 10, 11)]
    lost = 3  # the step from seen[3] loses a life
    for t, obs in enumerate(seen):
        replay.put_obs(obs)
        replay.commit(np.array([t % 3]), np.zeros(1, np.float32), np.array([t == lost]))
    states = {}
    for seed in range(20):
        batch = replay.sample(8, np.random.default_rng(seed))
        for b in range(8):
            states[int(batch.states[b, -1, 0, 0])] = batch.states[b].ravel().tolist()
            if int(batch.states[b, -1, 0, 0]) == 8:
                assert batch.discounts[b] == 0.0, "a lost life still ends the return"
    for obs in seen[: len(seen) - 1]:  # the last row has no next state yet
        assert states[int(obs[0, -1, 0, 0])] == obs.ravel().tolist()
