"""Pipeline files: what they resolve to, and every error they can raise."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from atari_speed import ConfigError, make_env, resolve_game, resolve_pipeline

BOOK = ["MaxAndSkip", "EpisodicLife", "FireReset", "WarpFrame", "ClipReward", "FrameStack"]


def names(pipeline):
    return [s["wrapper"] for s in pipeline["stages"]]


def test_shipped_pipelines():
    book, classic, fast = (resolve_pipeline(n) for n in ("book", "classic", "fast"))
    assert names(book) == BOOK
    assert names(classic) == ["NoopReset", *BOOK]
    assert names(fast) == BOOK
    assert book["stages"][0] == {"wrapper": "MaxAndSkip", "skip": 4, "max_pool": True}
    assert fast["stages"][0]["max_pool"] is False and fast["stages"][-1]["k"] == 2
    assert classic["stages"][0]["noop_max"] == 30
    assert book["stages"][3]["backend"] == "opencv"
    assert book["repeat_action_probability"] == 0.0


def test_resolved_pipeline_is_plain_json_and_resolves_to_itself():
    book = resolve_pipeline("book")
    assert json.loads(json.dumps(book)) == book
    assert resolve_pipeline(book) == book


def test_pipeline_from_path_and_dict(tmp_path: Path):
    path = tmp_path / "mine.toml"
    path.write_text('image_backend = "numpy"\n[[stage]]\nwrapper = "WarpFrame"\nwidth = 42\n')
    from_file = resolve_pipeline(path)
    assert from_file["name"] == "mine"
    assert from_file["stages"] == [
        {"wrapper": "WarpFrame", "width": 42, "height": 84, "grayscale": True, "backend": "numpy"}
    ]
    env = make_env({"stages": [{"wrapper": "WarpFrame", "width": 42}]}, "pong", seed=0)
    assert env.reset()[0].shape == (84, 42)


def test_make_env_obs_and_spaces():
    env = make_env("fast", "pong", seed=3)
    obs, _ = env.reset()
    assert np.asarray(obs).shape == env.observation_space.shape == (2, 84, 84)
    assert env.action_space.n == 6
    assert env.pipeline["name"] == "fast"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


STAGE = '[[stage]]\nwrapper = "{}"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            STAGE.format("MaxAndSkp"),
            r"p\.toml: stage 1: unknown wrapper 'MaxAndSkp' \(did you "
            r"mean MaxAndSkip\?\); known: NoopReset, MaxAndSkip",
        ),
        (
            STAGE.format("FrameStack") + "n = 4\n",
            r"stage 1 \(FrameStack\): unknown parameter 'n'; allowed: k",
        ),
        (
            STAGE.format("FrameStack") + 'k = "4"\n',
            r"stage 1 \(FrameStack\): k = '4' has type str; expected int in \[1, 16\]",
        ),
        (
            STAGE.format("MaxAndSkip") + "max_pool = 1\n",
            r"stage 1 \(MaxAndSkip\): max_pool = 1 has type int; expected true \| false",
        ),
        (STAGE.format("FrameStack") + "k = true\n", r"k = True has type bool; expected int"),
        (STAGE.format("FrameStack") + "k = 0\n", r"k = 0 is out of range; expected int in"),
        (STAGE.format("NoopReset") + "noop_max = 5000\n", r"noop_max = 5000 is out of range"),
        (
            STAGE.format("WarpFrame") + 'backend = "skimage"\n',
            r"backend = 'skimage' is not one of opencv \| pillow \| numpy",
        ),
        ('image_backend = "cv2"\n', r"image_backend = 'cv2' is not one of opencv"),
        ("repeat_action_probability = 2.0\n", r"repeat_action_probability = 2.0 is out of range"),
        ("frameskip = 4\n", r"unknown key 'frameskip'; allowed: description, image_backend"),
        (
            STAGE.format("FrameStack") + STAGE.format("WarpFrame"),
            r"stage 2 \(WarpFrame\) must come before stage 1 \(FrameStack\): it resizes single",
        ),
        (
            STAGE.format("WarpFrame") + STAGE.format("MaxAndSkip"),
            r"stage 2 \(MaxAndSkip\) must come before stage 1 \(WarpFrame\): it pools raw",
        ),
        (STAGE.format("ClipReward") * 2, r"wrapper ClipReward appears 2 times"),
        ("[[stage]\n", r"p\.toml: not valid TOML"),
        ("stage = 3\n", r"'stage' must be a list of \[\[stage\]\] tables"),
    ],
)
def test_bad_pipeline_files_name_file_stage_and_what_is_allowed(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as err:
        resolve_pipeline(path)
    assert str(path) in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_pipeline_name_lists_the_shipped_ones():
    with pytest.raises(ConfigError, match=r"'boook': no such file; .* one of: book, classic, fast"):
        resolve_pipeline("boook")


def test_dict_pipeline_errors_name_the_dict():
    with pytest.raises(ConfigError, match=r"<pipeline dict>: stage 1: unknown wrapper"):
        resolve_pipeline({"stages": [{"wrapper": "Nope"}]})


def test_game_names():
    assert resolve_game("pong") == "pong"
    assert resolve_game("Pong") == "pong"
    assert resolve_game("MsPacman") == "ms_pacman"
    assert resolve_game("space_invaders") == "space_invaders"
    assert resolve_game("PongNoFrameskip-v4") == "PongNoFrameskip-v4"


def test_unknown_game_lists_close_matches():
    with pytest.raises(ConfigError, match=r"game 'pongg': unknown Atari game; did you mean pong"):
        resolve_game("pongg")
    with pytest.raises(ConfigError, match=r"game 'Pong-v9': no such gymnasium id"):
        resolve_game("Pong-v9")


def test_errors_come_before_any_env_is_created(monkeypatch):
    import atari_speed.envs.pipeline as pipeline

    def boom(*args, **kwargs):
        raise AssertionError("an emulator was created before the pipeline was checked")

    monkeypatch.setattr(pipeline, "make_emulator", boom)
    with pytest.raises(ConfigError):
        make_env({"stages": [{"wrapper": "Nope"}]}, "pong")


def test_v5_id_with_a_skipping_pipeline_is_refused():
    with pytest.raises(ConfigError, match="already skips 4 frames"):
        make_env("book", "ALE/Pong-v5")


def test_sticky_actions_only_when_asked():
    plain = make_env("book", "pong")
    sticky = make_env({"repeat_action_probability": 0.25, "stages": []}, "pong")
    assert plain.unwrapped.ale.getFloat("repeat_action_probability") == 0.0
    assert sticky.unwrapped.ale.getFloat("repeat_action_probability") == 0.25
