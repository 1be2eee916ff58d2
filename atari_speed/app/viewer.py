"""Watching and recording a game for ``play.py``: a window and a video file.

Both take the emulator's raw RGB screen, ``(210, 160, 3)`` uint8, one frame at a time.
``Window`` shows it scaled up and paced to a frame rate (``open_window`` opens one, or says
in one line why it cannot); ``Recorder`` writes it to an ``.mp4`` or ``.gif``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path
from types import TracebackType

import cv2
import numpy as np
from PIL import Image

from atari_speed.core.errors import ConfigError

VIDEO_SUFFIXES = (".mp4", ".gif")
GIF_MAX_FPS = 50.0
QUIT_KEYS = {ord("q"), 27}  # q, Esc

SYSTEM_FONT_DIRS = ("/usr/share/fonts", "/usr/local/share/fonts", "/usr/X11R6/lib/X11/fonts")


def use_system_fonts() -> None:
    """Point OpenCV's Qt at fonts that exist, before it opens a window.

    Importing the opencv-python wheel sets QT_QPA_FONTDIR to its own ``cv2/qt/fonts``,
    which the wheel does not ship, so Qt prints ``QFontDatabase: Cannot find font
    directory`` several times on the first window. A system font directory fixes the
    cause; without one, Qt's uncategorised warnings are turned off instead.
    """
    if Path(os.environ.get("QT_QPA_FONTDIR", "/")).is_dir():
        return
    found = next((d for d in SYSTEM_FONT_DIRS if Path(d).is_dir()), None)
    if found:
        os.environ["QT_QPA_FONTDIR"] = found
    else:
        os.environ.pop("QT_QPA_FONTDIR", None)
        rules = os.environ.get("QT_LOGGING_RULES", "")
        os.environ["QT_LOGGING_RULES"] = ";".join(filter(None, (rules, "default.warning=false")))


use_system_fonts()  # cv2 is imported above: undo its font directory for this process

# Run in a throwaway child (see why_no_window); a cv2.error becomes one line on stderr.
# Its environment is this process's, fonts fixed; its own import of cv2 resets them, so
# the fix is repeated there.
_PROBE = """
import sys, cv2
from atari_speed.app.viewer import use_system_fonts
use_system_fonts()
try:
    cv2.namedWindow("probe")
    cv2.destroyAllWindows()
except cv2.error as err:
    sys.exit(str(err).strip().splitlines()[-1])
"""


def why_no_window() -> str | None:
    """None if this process can open a window, else why not, for a one-line message."""
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        return "no display found (DISPLAY unset)"
    # OpenCV's Qt backend does not raise when it cannot reach the display (a stale DISPLAY
    # over ssh, a Wayland-only session with an X11-only build): it aborts the whole process.
    # So a child tries first, and only its exit status and first complaint come back.
    try:
        probe = subprocess.run(
            [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        return "cannot open a window (no answer from the display in 30 s)"
    if probe.returncode != 0:
        lines = [line.strip() for line in probe.stderr.splitlines() if line.strip()]
        return f"cannot open a window ({lines[0] if lines else f'exit {probe.returncode}'})"
    return None


def scale_up(frame: np.ndarray, factor: int) -> np.ndarray:
    """Each pixel becomes a ``factor`` x ``factor`` block: sharp pixels, no blur."""
    height, width = frame.shape[:2]
    return cv2.resize(
        frame, (width * factor, height * factor), interpolation=cv2.INTER_NEAREST_EXACT
    )


def pace(due: float, now: float, fps: float) -> tuple[int, float]:
    """How long to wait before showing a frame that is ready ``now``, in ms, and when it is
    due on screen.

    ``due`` is when the previous frame was due. Frames change every ``1 / fps`` seconds on a
    fixed grid, whatever each step costs. A frame that comes late (a slow step, a dragged
    window) is shown at once and the grid restarts from it: play never races to catch up,
    and is never slower than the agent. ``fps`` 0: no waiting. The wait is at least 1 ms
    because ``cv2.waitKey(0)`` waits forever.
    """
    if fps <= 0:
        return 1, now
    due = max(due + 1 / fps, now)
    return max(1, round((due - now) * 1000)), due


class Window:
    """An OpenCV window showing frames ``scale`` times larger, at most ``fps`` a second.

    ``show`` returns False once the user has closed the window (or pressed q or Esc).
    Raises ``cv2.error`` if this OpenCV build has no GUI; ``open_window`` also checks first
    for the failures that cannot be caught.
    """

    def __init__(self, title: str, scale: int, fps: float) -> None:
        self.title, self.scale, self.fps = title, scale, fps
        self.due = time.monotonic()
        cv2.namedWindow(title, cv2.WINDOW_AUTOSIZE)

    def show(self, rgb: np.ndarray) -> bool:
        wait_ms, self.due = pace(self.due, time.monotonic(), self.fps)
        # The previous frame stays up until this one is due. waitKey is what paints the
        # window and delivers its events (keys, the close button), hence once more after.
        pressed = {cv2.waitKey(wait_ms) & 0xFF}
        cv2.imshow(self.title, cv2.cvtColor(scale_up(rgb, self.scale), cv2.COLOR_RGB2BGR))
        pressed.add(cv2.waitKey(1) & 0xFF)
        if pressed & QUIT_KEYS:
            return False
        # Checked before the next imshow, which would silently open the window again.
        try:
            return cv2.getWindowProperty(self.title, cv2.WND_PROP_VISIBLE) >= 1
        except cv2.error:  # some backends raise for a window that is gone
            return False

    def close(self) -> None:
        try:
            cv2.destroyWindow(self.title)
            cv2.waitKey(1)
        except cv2.error:  # already closed by the user
            pass


def open_window(title: str, scale: int, fps: float) -> tuple[Window | None, str | None]:
    """A new ``Window``, or None and why not (one line: no display, no GUI in this build)."""
    why_not = why_no_window()
    if why_not is not None:
        return None, why_not
    try:
        return Window(title, scale, fps), None
    except cv2.error as err:
        lines = str(err).strip().splitlines()
        return None, f"cannot open a window ({lines[-1] if lines else 'cv2.error'})"


def check_video_path(path: Path) -> None:
    """Raise ``ConfigError`` unless ``path`` names a video ``Recorder`` can write."""
    if path.suffix.lower() not in VIDEO_SUFFIXES:
        suffix = repr(path.suffix) if path.suffix else "(no suffix)"
        raise ConfigError(
            f"{path}: unsupported video format {suffix}; use {' or '.join(VIDEO_SUFFIXES)}"
        )
    if not path.parent.is_dir():
        raise ConfigError(f"{path}: directory {path.parent} does not exist")


def gif_delays(frames: int, fps: float) -> list[int]:
    """Per-frame delays in ms for a GIF, which counts time in hundredths of a second.

    30 fps is not a whole number of hundredths, so the delays alternate (30, 40, 30, ...)
    and the clip as a whole lasts ``frames / fps`` seconds, to the nearest 10 ms.
    """
    ticks = [round(i * 100 / fps) for i in range(frames + 1)]
    return [10 * (end - start) for start, end in pairwise(ticks)]


class Recorder:
    """Writes RGB frames to ``path``, an ``.mp4`` (OpenCV, 'mp4v') or a ``.gif`` (Pillow).

    Frames go to a hidden temporary file beside ``path``, which ``close`` moves over
    ``path``; leaving the ``with`` block through an exception deletes it instead. Either
    way no half-written video is ever left under the final name.
    A GIF is held in memory until ``close`` (about 34 kB a frame): use .mp4 for long games.
    """

    def __init__(self, path: Path, fps: float, size: tuple[int, int]) -> None:
        """``size`` is (width, height) of every frame to come."""
        check_video_path(path)
        self.path = path
        self.gif = path.suffix.lower() == ".gif"
        # GIF viewers stretch delays under 20 ms to 100 ms, so a faster GIF plays slower.
        self.fps = min(fps, GIF_MAX_FPS) if self.gif else fps
        self.frames = 0
        self.saved: Path | None = None
        # Ends in the real suffix: OpenCV and Pillow both pick the format from it. Not
        # mkstemp, whose 0600 files would keep that mode under the final name.
        self.temp = path.with_name(f".{path.name}.{os.getpid()}.partial{path.suffix}")
        try:
            self.temp.open("wb").close()
        except OSError as err:
            raise ConfigError(f"{path}: cannot write there: {err.strerror}") from err
        self.images: list[Image.Image] = []
        self.mp4: cv2.VideoWriter | None = None
        if not self.gif:
            # Opened now, so a build that cannot write mp4v fails before play, not after.
            fourcc = cv2.VideoWriter_fourcc(*"mp4v")
            self.mp4 = cv2.VideoWriter(str(self.temp), fourcc, self.fps, size)
            if not self.mp4.isOpened():
                self.discard()
                raise ConfigError(f"{path}: this OpenCV build cannot write mp4v video")

    def write(self, rgb: np.ndarray) -> None:
        if self.mp4 is not None:
            self.mp4.write(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
        else:
            # Paletted now rather than at save: a third of the memory, and exact, since an
            # Atari screen never has more than 128 colours.
            self.images.append(Image.fromarray(rgb).convert("P", palette=Image.Palette.ADAPTIVE))
        self.frames += 1

    def close(self) -> Path | None:
        """Finish the video and give it its final name; None if no frame was written."""
        try:
            if self.mp4 is not None:
                self.mp4.release()
            elif self.images:
                first, *rest = self.images
                # Pillow merges identical consecutive frames, adding up their delays, so the
                # file may hold fewer frames than written but always lasts as long.
                first.save(
                    self.temp,
                    save_all=True,
                    append_images=rest,
                    duration=gif_delays(self.frames, self.fps),
                    loop=0,
                )
                self.images = []
            if self.frames:
                os.replace(self.temp, self.path)
                self.saved = self.path
        finally:
            self.temp.unlink(missing_ok=True)
        return self.saved

    def discard(self) -> None:
        if self.mp4 is not None:
            self.mp4.release()
        self.images = []
        self.temp.unlink(missing_ok=True)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.discard()
