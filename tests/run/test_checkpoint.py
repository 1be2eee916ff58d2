"""The checkpoint format: old files still load, damaged ones are refused in one line."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from atari_speed.agent.learner import Learner
from atari_speed.agent.networks import DQN
from atari_speed.agent.replay import Batch
from atari_speed.core.config import DQNConfig
from atari_speed.core.errors import ConfigError
from atari_speed.run.checkpoint import (
    Checkpoint,
    load_checkpoint,
    save_checkpoint,
    unreadable_because,
)
from atari_speed.run.checkpoint import digest as contents_digest


def old_format(net: torch.nn.Module, **extra) -> dict:
    """A checkpoint.pt as the code before the package split wrote it (format version 1)."""
    return {
        "format": "atari-speed-checkpoint",
        "version": 1,
        "game": "pong",
        "pipeline": {"name": "book", "stages": []},
        "preset": {"run": {"mode": "n-env"}},
        "obs_shape": [4, 84, 84],
        "actions": 6,
        "dueling": False,
        "network": "nips",
        "frames": 600,
        "net": net.state_dict(),
        **extra,
    }


def test_a_checkpoint_of_the_old_layout_loads_and_plays(tmp_path):
    net = DQN((4, 84, 84), 6, network="nips")
    learner = {"net": net.state_dict(), "updates": 133}
    stats = {"episodes": 0, "smoothed": None, "best_smoothed": None, "best_eval": None}
    path = tmp_path / "checkpoint.pt"
    torch.save(old_format(net, learner=learner, stats=stats, rng={"numpy": {}}), path)
    checkpoint = load_checkpoint(path)
    assert checkpoint.resumable and checkpoint.frames == 600 and checkpoint.network == "nips"
    x = torch.randint(0, 255, (2, 4, 84, 84), dtype=torch.uint8)
    with torch.no_grad():
        assert torch.equal(checkpoint.policy(torch.device("cpu"))(x), net(x))


def test_a_checkpoint_from_before_the_network_field_is_natures(tmp_path):
    net = DQN((4, 84, 84), 6)
    data = old_format(net)
    del data["network"]
    torch.save(data, tmp_path / "best.pt")
    checkpoint = load_checkpoint(tmp_path / "best.pt")
    assert checkpoint.network == "nature" and not checkpoint.resumable


def assert_same(saved, loaded, where: str = "checkpoint") -> None:
    """Every tensor equal in dtype, shape and value; every other value equal; recursively."""
    if isinstance(saved, torch.Tensor):
        assert isinstance(loaded, torch.Tensor), where
        assert (saved.dtype, saved.shape) == (loaded.dtype, loaded.shape), where
        assert torch.equal(saved, loaded), where
    elif isinstance(saved, dict):
        assert isinstance(loaded, dict) and saved.keys() == loaded.keys(), where
        for key in saved:
            assert_same(saved[key], loaded[key], f"{where}[{key!r}]")
    elif isinstance(saved, list | tuple):
        assert isinstance(loaded, list | tuple) and len(saved) == len(loaded), where
        for i, (a, b) in enumerate(zip(saved, loaded, strict=True)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert saved == loaded and type(saved) is type(loaded), where


def test_saved_and_loaded_checkpoints_are_equal(tmp_path):
    # Every field of a resumable checkpoint: the network, a learner with Adam's state after
    # real updates, the tracker's stats and both RNG states after draws.
    torch.manual_seed(0)
    net = DQN((4, 42, 42), 6, network="small", layer_norm=True)
    learner = Learner(net, DQNConfig(batch_size=4, target_sync=1000), torch.device("cpu"))
    rng = np.random.default_rng(7)
    for _ in range(2):
        learner.step(
            Batch(
                states=rng.integers(0, 255, (4, 4, 42, 42), dtype=np.uint8),
                next_states=rng.integers(0, 255, (4, 4, 42, 42), dtype=np.uint8),
                actions=rng.integers(0, 6, 4),
                returns=rng.normal(size=4).astype(np.float32),
                discounts=np.full(4, 0.99, np.float32),
            )
        )
    torch.rand(5)  # the torch RNG moved on from its seed
    fields = old_format(net)
    del fields["format"], fields["version"]
    checkpoint = Checkpoint(
        **{**fields, "obs_shape": [4, 42, 42], "network": "small", "layer_norm": True},
        learner=learner.state_dict(),
        stats={"episodes": 3, "smoothed": -20.5, "best_smoothed": -19.0, "best_eval": None},
        rng={"numpy": rng.bit_generator.state, "torch": torch.get_rng_state()},
    )
    assert learner.state_dict()["optimizer"]["state"], "Adam has state to carry"
    save_checkpoint(checkpoint, tmp_path / "c.pt")
    loaded = load_checkpoint(tmp_path / "c.pt")
    for f in dataclasses.fields(Checkpoint):
        assert_same(getattr(checkpoint, f.name), getattr(loaded, f.name), f.name)
    assert loaded.resumable and not list(tmp_path.glob(".c.pt.tmp*")), "renamed into place"
    # The RNG states restored draw what the saved generators would have drawn next.
    again = np.random.default_rng()
    again.bit_generator.state = loaded.rng["numpy"]
    assert again.integers(0, 2**31, 8).tolist() == rng.integers(0, 2**31, 8).tolist()
    ahead = torch.rand(4)
    torch.set_rng_state(loaded.rng["torch"])
    assert torch.equal(torch.rand(4), ahead)


@pytest.mark.parametrize("preset", ["pong-nenv", "pong-pqn"])
def test_a_resumed_run_has_the_saved_learner_stats_and_rng_states(tmp_path, preset):
    # Run.checkpoint then Run(resume=...): the learner (nets, optimizer state, update
    # count), the frame count, the tracker's stats and both RNGs come back exactly; a
    # fresh Run of the same seed would have neither the updates nor the advanced RNGs.
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan
    from atari_speed.run.session import Run

    plan = make_plan(load_preset(preset, ["run.envs=2", "explore.epsilon_frames=128"]))
    first = Run(plan, tmp_path / "a")
    rng = np.random.default_rng(0)
    shape = (4, *plan.obs_shape)
    for _ in range(2):
        states = torch.from_numpy(rng.integers(0, 255, shape, dtype=np.uint8))
        actions = torch.from_numpy(rng.integers(0, plan.actions, 4))
        if preset == "pong-pqn":
            first.learner.step(states, actions, torch.ones(4))
        else:
            first.learner.step(
                Batch(
                    states=states.numpy(),
                    next_states=states.numpy(),
                    actions=actions.numpy(),
                    returns=np.ones(4, np.float32),
                    discounts=np.full(4, 0.99, np.float32),
                )
            )
    first.tracker.advance(96)
    scores = first.tracker.scores  # as if games had been played
    scores.episodes, scores.smoothed, scores.best_smoothed = 5, -20.0, -19.5
    first.tracker.record.best_eval = -18.0
    first.rng.random(10)
    torch.rand(3)
    first.checkpoint()
    saved_learner = first.learner.state_dict()
    saved_numpy, saved_torch = first.rng.bit_generator.state, torch.get_rng_state()
    first.tracker.close()
    first.lock.release()
    saved_stats = load_checkpoint(tmp_path / "a" / "checkpoint.pt").stats
    saved_record = saved_stats["record"]
    assert saved_record["scores"]["episodes"] == 5 and saved_record["best_eval"] == -18.0
    torch.manual_seed(123)  # the resumed run must set it back, not keep this
    second = Run(plan, tmp_path / "b", resume=str(tmp_path / "a" / "checkpoint.pt"))
    try:
        assert second.learner.updates == 2 and second.frames == 96
        # epsilon goes on from the resumed frames (96 of a 128-frame decay), not from 1
        explore = plan.preset.explore
        start, final = explore.epsilon_start, explore.epsilon_final
        assert second.epsilon == pytest.approx(start + 0.75 * (final - start))
        assert second.epsilon == first.epsilon < start
        assert_same(saved_learner, second.learner.state_dict(), "learner")
        stats = second.tracker.stats()
        # the wall time goes on from the saved one; everything else is as saved
        record = stats["record"]
        assert record.pop("seconds_before") >= saved_record.pop("seconds_before") > 0
        # and its CPU clock
        assert record.pop("cpu_seconds_before") >= saved_record.pop("cpu_seconds_before") > 0
        # and it notes where it was resumed
        assert (saved_record.pop("resumed_at"), record.pop("resumed_at")) == ([], [96])
        assert_same(saved_stats, stats, "stats")
        assert second.rng.bit_generator.state == saved_numpy
        assert torch.equal(torch.get_rng_state(), saved_torch)
    finally:
        second.tracker.close()
        second.lock.release()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 2}, r"c\.pt: checkpoint format version 2, this app reads 1"),
        ({"frames": None, "net": None, "extra": 1}, r"c\.pt: not a complete atari-speed"),
    ],
)
def test_other_versions_and_damaged_fields_are_refused_in_one_line(tmp_path, change, message):
    data = {k: v for k, v in {**old_format(DQN((4, 84, 84), 6)), **change}.items()}
    for key in [k for k, v in change.items() if v is None]:
        del data[key]
    torch.save(data, tmp_path / "c.pt")
    with pytest.raises(ConfigError, match=message) as err:
        load_checkpoint(tmp_path / "c.pt")
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------- fuzzing


@pytest.fixture(scope="module")
def real_checkpoint(tmp_path_factory):
    """checkpoint.pt of a short PQN run (small network: a 3 MB file), and its digest."""
    from tests.scripts import train_here

    run_dir = tmp_path_factory.mktemp("fuzz")
    args = ["--preset", "pong-pqn", "--envs", "2", "--frames", "64", "--run-dir", str(run_dir)]
    out = train_here(*args, "--set", "pqn.rollout=8", "--set", "pqn.minibatches=2")
    assert out.returncode == 0, out.stderr
    path = run_dir / "checkpoint.pt"
    return path, torch.load(path, weights_only=True)["digest"]


def damaged_copies(data: bytes, rng, cuts: int, flips: int):
    """(name, bytes): the file cut at random points, and with random bytes flipped (one,
    or a run of up to 64)."""
    for at in sorted(rng.integers(0, len(data), cuts)):
        yield f"cut at {at}", data[:at]
    for i in range(flips):
        damaged, at = bytearray(data), int(rng.integers(0, len(data)))
        width = 1 if i % 2 else int(rng.integers(2, 65))
        for j in range(at, min(at + width, len(data))):
            damaged[j] ^= int(rng.integers(1, 256))
        yield f"{width} byte(s) flipped at {at}", bytes(damaged)


def refused_in_one_line(code: int, err: str) -> bool:
    return code == 2 and err.count("\n") == 1 and "Traceback" not in err


def test_damaged_checkpoints_are_refused_by_play_in_one_line(real_checkpoint, tmp_path, capsys):
    from atari_speed.app.play import play_main

    path, good = real_checkpoint
    rng = np.random.default_rng(13)
    target = tmp_path / "checkpoint.pt"
    original = load_checkpoint(path)
    for name, data in damaged_copies(path.read_bytes(), rng, cuts=40, flips=60):
        target.write_bytes(data)
        try:  # a flip in the zip's padding leaves the contents whole: those must load
            intact = contents_digest(torch.load(target, weights_only=True)) == good
        except Exception:  # unreadable, or a tensor unreadable as bytes
            intact = False
        if intact:
            assert_same(original.net, load_checkpoint(target).net, name)
            continue
        code = play_main([str(target), "--episodes", "1", "--json"])
        err = capsys.readouterr().err
        assert refused_in_one_line(code, err), f"{name}: exit {code}, {err!r}"
        assert str(target) in err, name


def test_damaged_checkpoints_are_refused_by_resume_in_one_line(real_checkpoint, tmp_path, capsys):
    from atari_speed.app.cli import train_main

    path, _ = real_checkpoint
    rng = np.random.default_rng(14)
    target = tmp_path / "damaged" / "checkpoint.pt"
    target.parent.mkdir()
    # A tiny frame budget: a damaged copy that wrongly loaded would train briefly and fail
    # the check below, not train the preset's millions of frames in this process.
    args = ["--preset", "pong-pqn", "--envs", "2", "--frames", "64", "--run-dir"]
    args += [str(tmp_path / "run"), "--set", "pqn.rollout=8", "--set", "pqn.minibatches=2"]
    for name, data in damaged_copies(path.read_bytes(), rng, cuts=8, flips=8):
        target.write_bytes(data)
        code = train_main([*args, "--resume", str(target)])
        err = capsys.readouterr().err
        assert refused_in_one_line(code, err), f"{name}: exit {code}, {err!r}"
        assert not (tmp_path / "run").exists(), f"{name}: nothing is made for a bad checkpoint"


@pytest.mark.parametrize("script", ["play.py", "train.py"])
def test_a_damaged_checkpoint_ends_the_entry_points_at_once(real_checkpoint, tmp_path, script):
    from tests.scripts import run_script

    path, _ = real_checkpoint
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target = tmp_path / "checkpoint.pt"
    target.write_bytes(bytes(data))
    args = (
        [str(target)] if script == "play.py" else ["--preset", "pong-pqn", "--resume", str(target)]
    )
    # A generous deadline for a loaded machine: a run that wrongly took the file would
    # train the preset's millions of frames, far beyond it.
    out = run_script(script, *args, timeout=300)
    assert refused_in_one_line(out.returncode, out.stderr), out.stderr
    assert f"{target}: damaged checkpoint" in out.stderr


KILLED_WRITER = """
import sys, time
from pathlib import Path
from atari_speed.run.checkpoint import atomic_file
with atomic_file(Path(sys.argv[1])) as f:
    f.write(b"half of a new checkpoint")
    f.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


def test_a_writer_killed_mid_write_leaves_the_last_good_file_and_its_temp_is_cleared(tmp_path):
    import signal
    import subprocess
    import sys

    from atari_speed.run.checkpoint import save_atomic

    path = tmp_path / "checkpoint.pt"
    save_atomic({"version": "old"}, path)
    writer = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout.readline().strip() == "writing"
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    finally:
        writer.kill()
    # the kill left the last good file whole, and the writer's temp behind
    assert torch.load(path) == {"version": "old"}
    assert [p.name for p in tmp_path.glob(".checkpoint.pt.tmp-*")] == [
        f".checkpoint.pt.tmp-{writer.pid}"
    ]
    save_atomic({"version": "new"}, path)  # the next write clears the dead writer's temp
    assert torch.load(path) == {"version": "new"}
    assert list(tmp_path.glob(".checkpoint.pt.tmp-*")) == []


def test_a_live_writers_temp_is_kept(tmp_path):
    import subprocess
    import sys

    from atari_speed.run.checkpoint import remove_stale_temps

    path = tmp_path / "checkpoint.pt"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f".checkpoint.pt.tmp-{sleeper.pid}"
        live.write_bytes(b"being written")
        remove_stale_temps(path)
        assert live.exists()
    finally:
        sleeper.kill()
        sleeper.wait(timeout=30)
    remove_stale_temps(path)
    assert not live.exists()


def test_an_earlier_process_s_temp_of_this_process_s_pid_is_cleared(tmp_path):
    # a restarted container's trainer often has the PID of the one killed: a temp of its
    # PID written before it began is that one's; one written since is its own
    import os

    from atari_speed.run.checkpoint import IMPORTED_AT, remove_stale_temps

    old = tmp_path / f".100.pt.tmp-{os.getpid()}"
    mine = tmp_path / f".200.pt.tmp-{os.getpid()}"
    for f in (old, mine):
        f.write_bytes(b"half")
    os.utime(old, (IMPORTED_AT - 60, IMPORTED_AT - 60))
    remove_stale_temps(tmp_path / "*.pt")
    assert not old.exists() and mine.exists()


def test_a_pattern_clears_the_dead_writers_temps_of_files_written_once(tmp_path):
    # snapshots/<agent step>.pt: each name is written once, so no later write of the same
    # name clears a killed writer's temp; the pattern does, and keeps the live one's
    import subprocess
    import sys

    from atari_speed.run.checkpoint import remove_stale_temps

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=30)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stale = tmp_path / f".100.pt.tmp-{dead.pid}"
        kept = tmp_path / f".200-average.pt.tmp-{live.pid}"
        other = tmp_path / f".notes.txt.tmp-{dead.pid}"
        for f in (stale, kept, other):
            f.write_bytes(b"half")
        remove_stale_temps(tmp_path / "*.pt")
        assert not stale.exists() and kept.exists() and other.exists()
    finally:
        live.kill()
        live.wait(timeout=30)


def test_a_checkpoint_with_a_retired_key_still_loads(tmp_path):
    # checkpoints once kept each env's score so far in its game; a resume no longer reads it
    net = DQN((4, 84, 84), 6, network="nips")
    torch.save(old_format(net, env_phases=[3, 0], env_scores=[1.0, 0.0]), tmp_path / "c.pt")
    checkpoint = load_checkpoint(tmp_path / "c.pt")
    assert checkpoint.env_phases == [3, 0] and not hasattr(checkpoint, "env_scores")


def write_npz(path):
    with open(path, "wb") as f:  # under the .pt name: np.savez would add .npz to a path
        np.savez(f, frames=np.zeros(3))


class NotACheckpointPart:
    """A class no checkpoint pickles: weights_only loading refuses it by name."""


@pytest.mark.parametrize(
    ("write", "reason"),
    [
        (lambda p: p.write_bytes(b"hello, not a checkpoint\n"), "not a file torch.save wrote)"),
        (
            lambda p: torch.save({"part": NotACheckpointPart()}, p),
            "it pickles an object no checkpoint holds: ",
        ),
        (
            lambda p: (torch.save({"w": torch.zeros(64)}, p), p.write_bytes(p.read_bytes()[:100])),
            "truncated or corrupt",
        ),
        (
            lambda p: torch.save(
                {"part": NotACheckpointPart()}, p, _use_new_zipfile_serialization=False
            ),
            "it pickles an object no checkpoint holds: ",
        ),
        (
            write_npz,  # the replay.npz beside a checkpoint, given by mistake
            "a zip archive, but not one torch.save wrote)",
        ),
    ],
    ids=["text", "foreign-object", "truncated", "legacy-format-foreign-object", "npz"],
)
def test_an_unreadable_file_is_named_with_what_is_wrong_and_no_torch_advice(
    tmp_path, write, reason
):
    path = tmp_path / "run.pt"
    write(path)
    with pytest.raises(ConfigError) as refused:
        load_checkpoint(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: not a readable checkpoint (")
    assert reason in message and "checkpoint.pt and best.pt" in message
    # torch's own text advises loading with weights_only off (arbitrary code): never passed on
    assert "Weights only" not in message and "trust" not in message
    assert "\n" not in message and len(message) < 300


def test_a_file_gone_between_the_two_reads_is_still_one_line(tmp_path):
    gone = tmp_path / "gone.pt"  # torch.load failed, then the file went before the header read
    reason = unreadable_because(gone, RuntimeError("PytorchStreamReader failed"))
    assert "No such file or directory" in reason and "gone.pt" in reason
