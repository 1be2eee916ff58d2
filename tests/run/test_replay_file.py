"""replay.npz: saved and read back exactly, open games cut as truncations, damaged files
refused in one line with the buffer left empty."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from atari_speed.agent.replay import ARRAYS, FrameReplay
from atari_speed.core.errors import ConfigError, DiskFullError
from atari_speed.run import replay_file
from atari_speed.run.replay_file import load_replay, save_replay
from tests.agent.test_replay import stream

FRAME, K, N_STEPS = (1, 3, 2), 4, 3


def new_replay(capacity: int = 120, num_envs: int = 3) -> FrameReplay:
    return FrameReplay(capacity, num_envs, FRAME, K, n_steps=N_STEPS, gamma=0.9)


def play(replay: FrameReplay, steps: int, seed: int = 0) -> np.ndarray:
    """``steps`` vector steps into ``replay`` (games ending now and then); the observation
    after the last one, as the actor would hold it."""
    rng = np.random.default_rng(seed)
    steps_seen = list(stream(replay.num_envs, steps + 1, K, rng))
    for obs, actions, rewards, ends in steps_seen[:-1]:
        replay.put_obs(obs)
        replay.commit(actions, rewards, ends)
    return steps_seen[-1][0]


@pytest.mark.parametrize("steps", [10, 200])  # part filled; wrapped around the ring
def test_a_saved_replay_reads_back_as_if_its_open_games_were_truncated(tmp_path, steps):
    rng = np.random.default_rng(1)
    saved = new_replay()
    play(saved, steps)
    open_games = ~saved.ends[(saved.written - 1) % saved.rows, np.arange(saved.num_envs)]
    assert open_games.any(), "the test needs a game in progress"
    path = tmp_path / "replay.npz"
    save_replay(saved, path, frames=1234)
    restored = new_replay()
    assert load_replay(path, restored) == 1234
    # Each open game is cut (the test below shows a cut is a truncation).
    rows = restored.rows
    for e in range(3):
        w = int(saved.written[e])
        if not open_games[e]:
            continue
        last, prev = (w - 1) % rows, (w - 2) % rows
        assert restored.tail[last, e] and restored.terminal[last, e]
        if not saved.first[last, e]:  # else its game began there: nothing before to cut
            assert restored.ends[prev, e] and not restored.terminal[prev, e]
    for name in ("frames", "written", "first"):  # the cut changes no frame
        assert np.array_equal(getattr(restored, name), getattr(saved, name)), name
    untouched = np.ones_like(saved.ends)
    for e in np.flatnonzero(open_games):
        w = int(saved.written[e])
        untouched[[(w - 1) % rows, (w - 2) % rows], e] = False
    for name in ("actions", "rewards", "ends", "terminal", "tail"):
        a, b = getattr(restored, name), getattr(saved, name)
        assert np.array_equal(a[untouched], b[untouched]), name
    assert restored.pending_first.all(), "the next row starts a new game"
    # Played on, a cut game's last transition bootstraps (gamma, one step) from its tail.
    last_rows = (saved.written - 1) % rows
    cut = open_games & ~saved.first[last_rows, np.arange(3)]
    cut_at = {e: int(saved.written[e]) - 2 for e in np.flatnonzero(cut)}
    play(restored, 10, seed=5)
    batch, hits = restored.sample(4000, rng), 0
    for b in np.flatnonzero(batch.step == np.array([cut_at.get(int(e), -9) for e in batch.env])):
        e, hits = int(batch.env[b]), hits + 1
        assert batch.discounts[b] == pytest.approx(0.9)
        tail_frame = restored.frames[(cut_at[e] + 1) % rows, e]
        assert np.array_equal(batch.next_states[b][-1:], tail_frame)
        assert restored.first[(cut_at[e] + 2) % rows, e], "a new game after the tail"
    assert hits > 0


def test_the_cut_equals_a_truncation_committed_by_the_actor():
    # Two steps of one env; the second is the last saved. Cut, it must equal the replay in
    # which the first step was committed as truncated with the second's frame as final.
    obs = [np.full((1, K * FRAME[0], *FRAME[1:]), v, np.uint8) for v in (10, 20)]
    cut = FrameReplay(40, 1, FRAME, K, n_steps=1)
    for o, a in zip(obs, (1, 2), strict=True):
        cut.put_obs(o)
        cut.commit(np.array([a]), np.array([1.0], np.float32), np.array([False]))
    cut.end_open_episodes()
    truncated = FrameReplay(40, 1, FRAME, K, n_steps=1)
    truncated.put_obs(obs[0])
    truncated.commit(
        np.array([1]),
        np.array([1.0], np.float32),
        np.array([False]),
        truncated=np.array([True]),
        final_obs=obs[1],
    )
    truncated.pending_first[:] = True
    for name in (*ARRAYS, "pending_first"):
        assert np.array_equal(getattr(cut, name), getattr(truncated, name)), name


def test_a_replay_of_another_shape_is_refused_and_leaves_the_buffer_empty(tmp_path):
    saved = new_replay(num_envs=3)
    play(saved, 30)
    save_replay(saved, tmp_path / "replay.npz", frames=90)
    other = new_replay(num_envs=2)
    with pytest.raises(ConfigError, match=r"replay.npz: a replay of .*'columns': 3.*'columns': 2"):
        load_replay(tmp_path / "replay.npz", other)
    assert len(other) == 0


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_a_damaged_replay_is_refused_in_one_line_and_leaves_the_buffer_empty(tmp_path, damage):
    saved = new_replay()
    play(saved, 100)
    path = tmp_path / "replay.npz"
    save_replay(saved, path, frames=300)
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) * 2 // 3]
    elif damage == "flip":  # inside the deflated frames: the zip's CRC catches it
        with zipfile.ZipFile(path) as zf:
            info = zf.getinfo("frames.npy")
        at = info.header_offset + 30 + len(info.filename) + info.compress_size // 2
        data[at] ^= 0xFF
    else:
        data = bytearray(b"not a zip at all" * 10)
    path.write_bytes(bytes(data))
    restored = new_replay()
    with pytest.raises(ConfigError) as err:
        load_replay(path, restored)
    assert str(err.value).startswith(f"{path}: ") and "\n" not in str(err.value)
    assert len(restored) == 0


def test_a_full_disk_keeps_the_last_replay_and_leaves_no_temp_file(tmp_path, monkeypatch):
    replay = new_replay()
    play(replay, 50)
    path = tmp_path / "replay.npz"
    save_replay(replay, path, frames=150)
    good = path.read_bytes()

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(replay_file.np.lib.format, "write_array", full)
    with pytest.raises(DiskFullError, match=f"no space left on {tmp_path} while writing replay"):
        save_replay(replay, path, frames=160)
    assert path.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["replay.npz"]
