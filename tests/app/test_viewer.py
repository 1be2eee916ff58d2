"""viewer: pacing and scaling as pure functions, videos written and read back, and the
window's logic against stand-ins for OpenCV's GUI calls (the test machines have no display;
play.py's tests cover what happens without one)."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image, ImageSequence

from atari_speed.app.viewer import Recorder, Window, check_video_path, gif_delays, pace, scale_up
from atari_speed.core.errors import ConfigError


def test_pace_keeps_a_fixed_grid_whatever_each_step_costs():
    due, now, shown = 0.0, 0.0, []
    for step_cost in [0.010, 0.030, 0.001, 0.020] * 5:
        now += step_cost
        wait_ms, due = pace(due, now, fps=20)
        now += wait_ms / 1000
        shown.append(now)
        now += 0.001  # painting it
    gaps = np.diff(shown)
    assert gaps == pytest.approx(0.05, abs=0.0011)


def test_pace_after_a_stall_goes_on_at_normal_speed_without_catching_up():
    wait_ms, due = pace(due=1.0, now=1.5, fps=20)
    assert (wait_ms, due) == (1, 1.5)
    wait_ms, due = pace(due, now=1.51, fps=20)
    assert (wait_ms, due) == (40, pytest.approx(1.55))


def test_pace_never_waits_slower_than_the_agent_nor_zero_ms():
    # Steps slower than a frame: shown as soon as ready; waitKey(0) would block forever.
    assert pace(due=1.0, now=1.08, fps=20) == (1, 1.08)
    assert pace(due=5.0, now=1.0, fps=0) == (1, 1.0)


def test_scale_up_turns_each_pixel_into_a_block():
    frame = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    big = scale_up(frame, 3)
    assert big.shape == (6, 9, 3)
    assert np.array_equal(big, frame.repeat(3, axis=0).repeat(3, axis=1))


@pytest.mark.parametrize(("fps", "first"), [(30, [30, 40, 30, 30, 40, 30]), (25, [40] * 6)])
def test_gif_delays_add_up_to_the_clip_length(fps, first):
    delays = gif_delays(301, fps)
    assert delays[:6] == first and len(delays) == 301
    assert sum(delays) == 10 * round(301 * 100 / fps)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("out.avi", "out.avi: unsupported video format '.avi'; use .mp4 or .gif"),
        ("out", "out: unsupported video format (no suffix); use .mp4 or .gif"),
        ("nowhere/out.mp4", "nowhere/out.mp4: directory "),
    ],
)
def test_bad_video_paths_are_named(tmp_path, name, message):
    with pytest.raises(ConfigError) as err:
        check_video_path(tmp_path / name)
    assert message in str(err.value)
    if name.startswith("nowhere"):
        assert str(err.value).endswith("nowhere does not exist")


def frames(count: int) -> list[np.ndarray]:
    """Distinct 210x160 screens of a few colours, like the Atari's."""
    out = []
    for i in range(count):
        frame = np.full((210, 160, 3), (144, 72, 17), dtype=np.uint8)
        frame[20 + 5 * i : 30 + 5 * i, 40:60] = (236, 236, 236)
        out.append(frame)
    return out


def read_mp4(path: Path) -> list[np.ndarray]:
    capture = cv2.VideoCapture(str(path))
    out = []
    while True:
        ok, frame = capture.read()
        if not ok:
            return out
        out.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))


def test_mp4_holds_every_frame_as_rgb(tmp_path):
    path = tmp_path / "clip.mp4"
    with Recorder(path, 30, (160, 210)) as recorder:
        for frame in frames(12):
            recorder.write(frame)
    assert recorder.saved == path and os.listdir(tmp_path) == ["clip.mp4"]
    back = read_mp4(path)
    assert len(back) == 12 and back[0].shape == (210, 160, 3)
    # Lossy, but red and blue must not be swapped.
    assert np.abs(back[5][100, 100].astype(int) - (144, 72, 17)).max() < 12


def test_gif_is_exact_and_lasts_as_long_as_written(tmp_path):
    path = tmp_path / "clip.gif"
    written = [*frames(4), *frames(4)[-1:] * 3]  # three repeats of the last screen
    with Recorder(path, 30, (160, 210)) as recorder:
        for frame in written:
            recorder.write(frame)
    gif = Image.open(path)
    assert gif.size == (160, 210)
    back = [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(gif)]
    # Pillow merges the repeats into one frame shown 4 times as long.
    assert len(back) == 4
    assert all(np.array_equal(a, b) for a, b in zip(back, written, strict=False))
    durations = [f.info["duration"] for f in ImageSequence.Iterator(Image.open(path))]
    assert sum(durations) == sum(gif_delays(7, 30))


def test_an_error_while_recording_leaves_no_file(tmp_path):
    with pytest.raises(RuntimeError), Recorder(tmp_path / "clip.mp4", 30, (160, 210)) as rec:
        rec.write(frames(1)[0])
        raise RuntimeError("env died")
    assert os.listdir(tmp_path) == []


def test_no_frames_no_file(tmp_path):
    with Recorder(tmp_path / "clip.gif", 30, (160, 210)) as recorder:
        pass
    assert recorder.saved is None and os.listdir(tmp_path) == []


def test_the_video_gets_the_usual_file_mode(tmp_path):
    umask = os.umask(0)
    os.umask(umask)
    with Recorder(tmp_path / "clip.gif", 30, (160, 210)) as recorder:
        recorder.write(frames(1)[0])
    assert (tmp_path / "clip.gif").stat().st_mode & 0o777 == 0o666 & ~umask


class FakeGui:
    """Stands in for OpenCV's GUI calls (no display here): records what the window shows."""

    def __init__(self, keys: list[int], visible: list[float]) -> None:
        self.keys, self.visible, self.shown = keys, visible, []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(cv2, "namedWindow", lambda title, flags: None)
        monkeypatch.setattr(cv2, "imshow", lambda title, bgr: self.shown.append(bgr))
        monkeypatch.setattr(cv2, "waitKey", lambda ms: self.keys.pop(0) if self.keys else -1)
        monkeypatch.setattr(cv2, "getWindowProperty", lambda title, prop: self.visible.pop(0))


def test_window_shows_scaled_bgr_until_closed(monkeypatch):
    gui = FakeGui(keys=[], visible=[1.0, 0.0])
    gui.install(monkeypatch)
    window = Window("test", scale=2, fps=0)
    frame = frames(1)[0]
    assert window.show(frame) is True
    assert window.show(frame) is False  # the user closed it
    assert gui.shown[0].shape == (420, 320, 3)
    assert tuple(gui.shown[0][200, 200]) == (17, 72, 144)


@pytest.mark.parametrize("key", [ord("q"), 27, 0x100 + ord("q")])
def test_q_or_esc_closes_the_window(monkeypatch, key):
    FakeGui(keys=[-1, key], visible=[1.0]).install(monkeypatch)
    assert Window("test", scale=1, fps=0).show(frames(1)[0]) is False
