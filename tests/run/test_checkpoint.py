"""The checkpoint format: old files still load, damaged ones are refused in one line."""

from __future__ import annotations

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
