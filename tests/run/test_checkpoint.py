"""The checkpoint format: old files still load, damaged ones are refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from atari_speed.agent.networks import DQN
from atari_speed.core.errors import ConfigError
from atari_speed.run.checkpoint import Checkpoint, load_checkpoint, save_checkpoint


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


def test_saved_and_loaded_checkpoints_are_equal(tmp_path):
    net = DQN((4, 42, 42), 6, network="small")
    fields = old_format(net)
    del fields["format"], fields["version"]
    checkpoint = Checkpoint(**{**fields, "obs_shape": [4, 42, 42], "network": "small"})
    save_checkpoint(checkpoint, tmp_path / "c.pt")
    loaded = load_checkpoint(tmp_path / "c.pt")
    assert loaded.obs_shape == [4, 42, 42] and loaded.net.keys() == net.state_dict().keys()
    assert not list(tmp_path.glob(".c.pt.tmp*")), "the temp file is renamed into place"


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
    from tests.scripts import run_script

    run_dir = tmp_path_factory.mktemp("fuzz")
    args = ["--preset", "pong-pqn", "--envs", "2", "--frames", "64", "--run-dir", str(run_dir)]
    out = run_script("train.py", *args, "--set", "pqn.rollout=8", "--set", "pqn.minibatches=2")
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
    for name, data in damaged_copies(path.read_bytes(), rng, cuts=40, flips=60):
        target.write_bytes(data)
        try:  # a flip in the zip's padding changes nothing: such a file is the original
            if torch.load(target, weights_only=True).get("digest") == good:
                load_checkpoint(target)
                continue
        except Exception:
            pass
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
    args = ["--preset", "pong-pqn", "--envs", "2", "--run-dir", str(tmp_path / "run")]
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
    out = run_script(script, *args, timeout=60)
    assert refused_in_one_line(out.returncode, out.stderr), out.stderr
    assert f"{target}: damaged checkpoint" in out.stderr
