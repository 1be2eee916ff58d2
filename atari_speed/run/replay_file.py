"""DQN's replay on disk (``replay.npz`` beside ``checkpoint.pt``), so ``--resume`` trains on
at once instead of refilling ``replay.initial`` frames first.

The file is a zip of ``.npy`` arrays, the layout's own (``np.load`` opens it to look
inside), plus ``meta.json``: deflated at level 1, which is fast and takes Pong's frames
down to a few percent (docs/reliability.md has the sizes and times). Only the rows ever
written are stored. It is written atomically like the checkpoint, and read straight into
the run's buffer, a chunk at a time, so a 7 GB replay never needs twice its memory.

A replay is read only into a buffer of the same shape (capacity, env columns, frames,
stack, n-step): a run resumed with other settings refills, and says why.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from atari_speed.agent.replay import ARRAYS, FrameReplay
from atari_speed.core.errors import ConfigError
from atari_speed.run.checkpoint import atomic_file

REPLAY_FILE = "replay.npz"  # beside checkpoint.pt
FORMAT = "atari-speed-replay"
VERSION = 1
CHUNK = 1 << 26  # bytes read at a time into the buffer


def shape_of(replay: FrameReplay) -> dict[str, Any]:
    """What must match for a saved replay to be read into ``replay``."""
    return {
        "capacity": replay.capacity,
        "columns": replay.num_envs,
        "rows": replay.rows,
        "frame_shape": list(replay.frame_shape),
        "k": replay.k,
        "n_steps": replay.n_steps,
    }


def rows_used(replay: FrameReplay) -> int:
    """Rows of the ring holding data: all of them once a column has wrapped."""
    return int(min(int(replay.written.max(initial=0)), replay.rows))


def save_replay(replay: FrameReplay, path: Path, frames: int) -> int:
    """Write ``replay`` to ``path`` atomically; its size in bytes. ``frames`` is the run's
    frame count, which the checkpoint saved with it carries too."""
    used = rows_used(replay)
    meta = {"format": FORMAT, "version": VERSION, "frames": frames, "rows_used": used}
    meta.update(shape_of(replay))
    with (
        atomic_file(path) as f,
        zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf,
    ):
        zf.writestr("meta.json", json.dumps(meta))
        for name, array in replay.arrays().items():
            part = array[:used] if array.ndim > 1 else array  # the (rows, columns) ones
            with zf.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.ascontiguousarray(part))
    return path.stat().st_size


def load_replay(path: Path, replay: FrameReplay) -> int:
    """Read ``path`` into ``replay`` and close the games it was in the middle of; the run
    frame count it was saved at. ConfigError (naming the file and why) if it is missing,
    damaged or of another shape; ``replay`` is then left empty."""
    if not path.is_file():
        raise ConfigError(f"{path}: no saved replay")
    try:
        with zipfile.ZipFile(path) as zf:
            meta = json.loads(zf.read("meta.json"))
            if meta.get("format") != FORMAT or meta.get("version") != VERSION:
                raise ConfigError(f"{path}: not an atari-speed replay of version {VERSION}")
            ours = shape_of(replay)
            theirs = {key: meta.get(key) for key in ours}
            if theirs != ours:
                raise ConfigError(f"{path}: a replay of {theirs}, this run's is {ours}")
            used = int(meta["rows_used"])
            # ``written`` last: until it is read, the buffer holds no visible row.
            for name in (*[a for a in ARRAYS if a != "written"], "written"):
                array = replay.arrays()[name]
                with zf.open(f"{name}.npy") as member:
                    _read_into(member, array[:used] if array.ndim > 1 else array)
    except ConfigError:
        replay.written[:] = 0
        raise
    except Exception as err:  # truncated, corrupt (zip CRC), or not a zip at all
        replay.written[:] = 0
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ConfigError(f"{path}: not a readable replay ({first[:160]})") from None
    replay.end_open_episodes()
    return int(meta["frames"])


def _read_into(member: BinaryIO, out: np.ndarray) -> None:
    """Read one ``.npy`` member into ``out`` (same shape and dtype), a chunk at a time."""
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
    if tuple(shape) != out.shape or dtype != out.dtype or fortran:
        raise ValueError(f"array of {shape} {dtype}, expected {out.shape} {out.dtype}")
    view = memoryview(out.reshape(-1).view(np.uint8))  # out is a contiguous row range
    done = 0
    while done < len(view):
        n = member.readinto(view[done : done + CHUNK])
        if not n:
            raise ValueError(f"array ends after {done} of {len(view)} bytes")
        done += n
