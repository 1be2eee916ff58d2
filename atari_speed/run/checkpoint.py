"""The checkpoint format: what a run saves, how it is written and read back.

A checkpoint is a ``torch.save`` of plain containers and tensors only, so it loads with
``weights_only=True`` (no arbitrary unpickling). ``checkpoint.pt`` carries everything a
run needs to resume; ``best.pt`` only the network. Writes are atomic: a crash mid-write
keeps the previous file.

It also carries a SHA-256 ``digest`` of its contents: torch.load does not check the zip's
CRCs, so a flipped byte inside a tensor loads without complaint, and play.py would play,
or --resume train on, damaged weights. Files from before the digest load unchecked.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, BinaryIO

import torch

from atari_speed.agent.averaging import plays_average
from atari_speed.agent.networks import DQN
from atari_speed.core.errors import ConfigError, DiskFullError, disk_full_cause

FORMAT = "atari-speed-checkpoint"
VERSION = 1
# before any file this process writes: a temp of this process's PID last written before
# it is an earlier process's, which had the same PID (a restarted container's trainer)
IMPORTED_AT = time.time()


@dataclass(frozen=True)
class Checkpoint:
    """One saved run. The fields are the file's keys, besides ``format`` and ``version``."""

    game: str  # the game: its ALE ROM id (pong) or gymnasium id
    pipeline: dict[str, Any]  # the resolved wrapper pipeline, to rebuild the env
    preset: dict[str, Any]  # every preset field the run had
    obs_shape: list[int]
    actions: int
    dueling: bool
    frames: int  # agent steps trained, all envs
    net: dict[str, torch.Tensor]  # the online network's weights
    network: str = "nature"  # dqn.network; checkpoints from before that field are Nature's
    layer_norm: bool = False  # dqn.layer_norm (PQN's networks)
    quantiles: int = 0  # dqn.quantiles; checkpoints from before that field have none
    learner: dict[str, Any] | None = None  # target net, optimizer, updates: to resume
    stats: dict[str, Any] | None = None  # the tracker's scores and wall time: to resume
    rng: dict[str, Any] | None = None  # numpy and torch RNG states: to resume
    average: dict[str, Any] | None = None  # eval.average_steps' averaged weights: to resume
    held: dict[str, Any] | None = None  # pqn.learn_while_held's agent and score: to resume
    # n-env mode: each env's agent steps into its game in progress (run.resume_phases)
    env_phases: list[int] | None = None

    @property
    def resumable(self) -> bool:
        return None not in (self.learner, self.stats, self.rng)

    def to_dict(self) -> dict[str, Any]:
        # Shallow: dataclasses.asdict would deep-copy every tensor of the state dicts.
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        out = {
            "format": FORMAT,
            "version": VERSION,
            **{k: v for k, v in data.items() if v is not None},
        }
        out["digest"] = digest(out)
        return out

    def evaluates_average(self) -> bool:
        """Whether the run's evaluations would play the average at this checkpoint
        (``plays_average``; a checkpoint from before eval.average_from: always)."""
        average_from = (self.preset or {}).get("eval", {}).get("average_from", -1000.0)
        return plays_average(average_from, _smoothed(self.stats))

    def policy(self, device: torch.device, evaluated: bool = False) -> DQN:
        """The network with its weights, on ``device``, in eval mode, to play; ConfigError
        if the weights do not fit the network the checkpoint names. ``evaluated``: the
        weights the run's evaluations would play at this checkpoint instead, their moving
        average where the run kept one (``eval.average_steps``) and its smoothed score was
        at ``eval.average_from``."""
        net = DQN(
            tuple(self.obs_shape),
            self.actions,
            dueling=self.dueling,
            network=self.network,
            layer_norm=self.layer_norm,
            quantiles=self.quantiles,
        )
        try:
            average = self.average if evaluated and self.evaluates_average() else None
            net.load_state_dict(self.net if average is None else average["weights"])
        except (RuntimeError, TypeError, AttributeError) as err:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise ConfigError(
                f"checkpoint of {self.game}: its weights do not fit a {self.network} network "
                f"for observations {list(self.obs_shape)} ({first[:160]})"
            ) from None
        return net.to(device).eval()


def _smoothed(stats: dict[str, Any] | None) -> float | None:
    """The smoothed training score a resumable checkpoint's record holds (None: none)."""
    scores = ((stats or {}).get("record") or {}).get("scores") or {}
    return scores.get("smoothed")


def digest(data: dict[str, Any]) -> str:
    """SHA-256 of a checkpoint's contents (its ``digest`` key aside): every key, value and
    tensor byte, in a fixed order."""
    h = hashlib.sha256()

    def feed(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            t = value.detach().cpu().contiguous()
            h.update(f"tensor {t.dtype} {tuple(t.shape)};".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(value, dict):
            h.update(f"dict {len(value)};".encode())
            for key in sorted(value, key=repr):
                feed(key)
                feed(value[key])
        elif isinstance(value, list | tuple):
            h.update(f"{type(value).__name__} {len(value)};".encode())
            for item in value:
                feed(item)
        else:
            h.update(f"{type(value).__name__} {value!r};".encode())

    feed({k: v for k, v in data.items() if k != "digest"})
    return h.hexdigest()


def save_atomic(obj: dict[str, Any], path: Path) -> None:
    """torch.save to a temp file, fsync, rename: a crash mid-write keeps the old file."""
    with atomic_file(path) as f:
        torch.save(obj, f)


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temp file, then rename: a reader never sees half a file."""
    with atomic_file(path) as f:
        f.write(text.encode())


@contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A binary file that becomes ``path`` (fsynced, renamed) when the block ends well.

    On any error the temp file is removed and ``path`` keeps its last good version; a
    full disk is raised as DiskFullError naming the directory (torch.save hides the
    OSError behind a RuntimeError, so the error's chain is what tells).
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    remove_stale_temps(path)
    try:
        with open(tmp, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if disk_full_cause(err) is not None and not isinstance(err, DiskFullError):
            raise DiskFullError(
                f"no space left on {path.parent} while writing {path.name}: free some space "
                f"or give --run-dir on another disk ({path.name} keeps its last good version)"
            ) from err
        raise


def remove_stale_temps(path: Path) -> None:
    """Remove the half-written temp files of ``path`` whose writer is gone: a process
    killed mid-write (SIGKILL, power loss) leaves its ``.<name>.tmp-<pid>``, as large as
    the file, which nothing else would ever remove. A live writer's file is kept. The
    name may be a pattern (``snapshots/*.pt``: files each written once, whose own next
    write never comes). A temp of this process's own PID is an earlier process's where
    it was last written before this one began."""
    for tmp in path.parent.glob(f".{path.name}.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[1]
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            if int(pid) == os.getpid():
                stale = tmp.stat().st_mtime < IMPORTED_AT
            else:
                stale = not _alive(int(pid))
            if stale:
                tmp.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


# Keys older checkpoints of this version may hold and this app no longer reads: each
# env's score so far in its game (a resume scores no game then in flight, Actor.realign).
RETIRED = ("env_scores",)


def save_checkpoint(checkpoint: Checkpoint, path: Path) -> None:
    save_atomic(checkpoint.to_dict(), path)


def unreadable_because(path: Path, err: Exception) -> str:
    """torch.load's refusal of a file, in a clause. Its own message is paragraphs of advice
    on loading untrusted pickles with weights_only off, which no user of this app should
    take, or a bare KeyError for some bytes that are no pickle at all."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as gone:  # removed or unreadable since torch.load tried
        return str(gone)
    # torch.save writes a zip archive; before torch 1.6 (and on request) a bare pickle
    if not head.startswith((b"PK\x03\x04", b"\x80")):
        return "not a file torch.save wrote"
    text = str(err)
    if "inline_container" in text:  # a zip torch did not write, e.g. the replay.npz beside
        return "a zip archive, but not one torch.save wrote"
    if "zip archive" in text or "archive is corrupted" in text:
        return "truncated or corrupt: torch cannot read it as the zip archive torch.save writes"
    refusal = re.search(r"Unsupported global: GLOBAL (\S+)", text)
    if refusal:
        return f"it pickles an object no checkpoint holds: {refusal.group(1)}"
    if isinstance(err, OSError):
        return str(err)
    first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
    return first[:160]


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Load a checkpoint of this app safely, or raise ConfigError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such checkpoint file")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated, corrupt or foreign pickles all land here
        raise ConfigError(
            f"{path}: not a readable checkpoint ({unreadable_because(path, err)}); train.py writes"
            " checkpoint.pt and best.pt in its run directory"
        ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigError(f"{path}: not an atari-speed checkpoint")
    if data.get("version") != VERSION:
        raise ConfigError(
            f"{path}: checkpoint format version {data.get('version')}, this app reads {VERSION}"
        )
    try:
        sound = "digest" not in data or data["digest"] == digest(data)
    except Exception:  # a damaged tensor that cannot even be read as bytes
        sound = False
    if not sound:
        raise ConfigError(f"{path}: damaged checkpoint (its contents do not match its digest)")
    fields = {k: v for k, v in data.items() if k not in ("format", "version", "digest", *RETIRED)}
    try:
        return Checkpoint(**fields)
    except TypeError as err:  # a key missing or unknown: a damaged or foreign file
        raise ConfigError(f"{path}: not a complete atari-speed checkpoint ({err})") from None


def find_checkpoint(path: Path) -> Path:
    """A checkpoint file, or a run directory's best.pt (else its checkpoint.pt)."""
    if path.is_dir():
        return next(
            (p for p in (path / "best.pt", path / "checkpoint.pt") if p.exists()),
            path / "checkpoint.pt",
        )
    return path
