"""train.py end to end with tiny budgets: modes, checkpoints, resume, Ctrl-C. Runs about the
process (signals, actor processes, the script itself) start train.py as a user would; the
others call its main in this process."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from atari_speed.agent.actor import Game
from atari_speed.core.errors import ConfigError
from atari_speed.run.checkpoint import load_checkpoint
from atari_speed.run.evaluation import MERGING_ENVS
from atari_speed.run.lock import RunDirLock
from atari_speed.run.tracking import Scores
from tests.scripts import (
    assert_no_shm_left,
    run_script,
    shm_segments,
    start_script,
    train_here,
)

# pong-fast with nothing left to "auto": no calibration in a test
AUTO_OFF = ["run.precision='fp32'", "env.backend='sync'"]

TINY = [
    # on the CPU also where a GPU is: these tests compare weights bit for bit, which CUDA's
    # kernels need not reproduce (tests/test_cuda.py runs train.py there)
    "--device",
    "cpu",
    "--set",
    "replay.initial=200",
    "--set",
    "replay.size=2000",
    "--set",
    "run.log_every=100",
    "--set",
    "dqn.target_sync=50",
    "--set",
    "explore.epsilon_frames=400",
    # The 2013 network: an update costs about half the book's Nature network's on a CPU, and
    # these runs test the loop, not the network.
    "--set",
    "dqn.network='nips'",
]


def train(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """train.py in a process of its own (``run_script``)."""
    return run_script("train.py", *args, timeout=timeout)


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


@pytest.fixture(scope="module")
def nenv_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("nenv")
    # 2,400 emulator frames at the book pipeline's frame skip of 4: 600 agent steps
    args = ["--preset", "pong-nenv", "--emulator-frames", "2400", "--run-dir", str(run_dir)]
    out = train_here(*args, *TINY)
    assert out.returncode == 0, out.stderr
    assert "budget: run.emulator_frames 2,400 = run.steps 600 agent steps (frame skip 4)" in (
        out.stdout
    )
    return run_dir


def test_nenv_mode_end_to_end(nenv_run):
    s = summary(nenv_run)
    assert s["mode"] == "n-env" and s["envs"] == 3 and s["steps"] == 600
    assert s["emulator_frames"] == 2400 and s["fps"] > 0 and s["device"] == "cpu"
    # the budget, converted once, is saved in agent steps only (a resume reads it so)
    assert (s["preset"]["run"]["steps"], s["preset"]["run"]["emulator_frames"]) == (600, 0)
    assert s["update_to_data"] == {"batch_size": 96, "train_every": 3, "samples_per_frame": 32.0}
    assert s["pipeline"]["name"] == "book" and s["preset"]["dqn"]["batch_size"] == 96
    assert list(nenv_run.glob("events.out.tfevents.*")), "TensorBoard logs"
    data = load_checkpoint(nenv_run / "checkpoint.pt")
    assert data.frames == 600 and data.game == "pong" and data.actions == 6
    # (600 - 200 initial) frames / 3 frames per update
    assert data.learner["updates"] == 133
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(nenv_run)).Reload()
    updates = events.Scalars("train/sgd_updates")
    assert len(updates) > 2 and all(u.value == max(u.step - 200, 0) // 3 for u in updates)
    rate = s["preset"]["dqn"]["learning_rate"]
    assert all(e.value == pytest.approx(rate) for e in events.Scalars("train/learning_rate"))
    eps = s["preset"]["dqn"]["adam_eps"]
    assert all(e.value == pytest.approx(eps) for e in events.Scalars("train/adam_eps"))
    # Loads with weights_only=True: tensors and plain containers only.
    torch.load(nenv_run / "checkpoint.pt", weights_only=True)


def test_outcome_line_rounds_the_best_reward():
    from atari_speed.app.cli import outcome

    s = {"steps": 774752, "seconds": 8700.0, "fps": 89.0, "episodes": 331, "solved": False}
    assert outcome({**s, "best_avg_reward": 10.967980155565234}) == (
        "774,752 agent steps in 2h25m00s (89 FPS), 331 games, best smoothed reward +11.0: "
        "not solved"
    )
    assert "best smoothed reward none (no game finished)" in outcome({**s, "best_avg_reward": None})


def resume(nenv_run: Path, run_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    checkpoint = str(nenv_run / "checkpoint.pt")
    args = ["--preset", "pong-nenv", "--frames", "900", "--run-dir", str(run_dir)]
    return train_here(*args, "--resume", checkpoint, *TINY, *extra)


def test_resume_continues_frames_optimizer_stats_and_replay(nenv_run, tmp_path):
    before = load_checkpoint(nenv_run / "checkpoint.pt")
    # another run's games, in the directory resumed into: not this run's logs, kept
    theirs = "seconds,frames,score,smoothed\n1.0,900,-21,-21\n"
    (tmp_path / "scores.csv").write_text(theirs)
    out = resume(nenv_run, tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "scores.csv").read_text().startswith(theirs)
    assert "rows dropped" not in out.stdout
    restored = f"--resume: 600 transitions restored from {nenv_run / 'replay.npz'}"
    assert restored in out.stdout
    after = load_checkpoint(tmp_path / "checkpoint.pt")
    assert after.frames == 900
    # The replay came back whole: no warm-up, 1 update per 3 frames from the first one.
    assert after.learner["updates"] - before.learner["updates"] == 100
    adam = after.learner["optimizer"]["state"][0]["step"]
    assert float(adam) == after.learner["updates"], "Adam's state carried over"
    assert summary(tmp_path)["seconds"] > summary(nenv_run)["seconds"]
    assert summary(tmp_path)["choices"]["replay_restored"] == 600
    assert (tmp_path / "replay.npz").is_file()


def test_resume_without_the_replay_refills_it_and_says_so(nenv_run, tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    (source / "checkpoint.pt").write_bytes((nenv_run / "checkpoint.pt").read_bytes())
    out = resume(source, tmp_path / "run", "--set", "run.replay_save=false")
    assert out.returncode == 0, out.stderr
    assert (
        f"--resume: {source / 'replay.npz'}: no saved replay; refilling 200 transitions"
        in out.stdout
    )
    updates = load_checkpoint(tmp_path / "run" / "checkpoint.pt").learner["updates"]
    # The replay is refilled (200 frames), then 1 update per 3 frames resumes the count.
    assert 30 <= updates - load_checkpoint(source / "checkpoint.pt").learner["updates"] <= 34
    assert not (tmp_path / "run" / "replay.npz").exists(), "run.replay_save = false"


def test_resumed_in_its_own_directory_its_curve_does_not_run_twice(nenv_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(nenv_run, run_dir)
    scores = run_dir / "scores.csv"
    kept = scores.read_text() if scores.is_file() else ""  # no game by 600 frames: no file
    # two games a run killed after its checkpoint at 600 frames logged, and lost
    header = "" if kept else "seconds,steps,score,smoothed\n"
    scores.write_text(kept + header + "99.0,650,99,99\n99.5,700,99,99\n")
    out = train_here(
        "--preset", "pong-nenv", "--frames", "900", "--run-dir", str(run_dir),
        "--resume", str(run_dir / "checkpoint.pt"), *TINY,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert f"--resume: {scores}: the last 2 rows dropped (games logged after the" in out.stdout
    assert scores.read_text().startswith(kept)
    assert ",99,99" not in scores.read_text()
    assert summary(run_dir)["steps"] == 900
    RunDirLock(run_dir).acquire().release()  # the run let go of its directory on the way out


def test_a_bare_resume_goes_on_with_its_checkpoints_preset_in_its_directory(
    nenv_run, tmp_path, monkeypatch
):
    # The README's `train.py --resume <run dir>/checkpoint.pt`: no --preset (pong-fast's
    # auto would calibrate again), no --run-dir (a new directory under runs/).
    run_dir = tmp_path / "run"
    shutil.copytree(nenv_run, run_dir)
    monkeypatch.chdir(tmp_path)  # where a default run directory would be made
    checkpoint = run_dir / "checkpoint.pt"
    out = train_here("--resume", str(checkpoint), "--frames", "900")
    assert out.returncode == 0, out.stderr
    assert (
        f"--resume: {checkpoint}: pong-nenv as resolved at its start (n-env, 3 envs, sync "
        "backend, fp32, 600 agent steps), changed by what was given with --resume: run.steps "
        "600 -> 900\n"
    ) in out.stdout
    assert "auto configuration" not in out.stdout and not (tmp_path / "runs").exists()
    first = load_checkpoint(nenv_run / "checkpoint.pt").preset
    s = summary(run_dir)
    assert s["steps"] == 900 and s["preset"] == {**first, "run": {**first["run"], "steps": 900}}
    assert s["envs"] == 3 and s["precision"] == "fp32"


# Killed runs: SIGKILL (no checkpoint on the way out: the last periodic one is resumed), each
# time resumed in place with a bare --resume; then the run goes to its end. Breakout played at
# random: its games end within a few hundred frames of each env.
KILLED = [*TINY, "--game", "breakout", "--set", "dqn.batch_size=32"]
KILLED += ["--set", "dqn.train_every=8", "--set", "explore.epsilon_final=1.0"]
KILLED += ["--set", "run.checkpoint_every=600", "--set", "eval.every=1200"]
KILLED += ["--set", "eval.episodes=1", "--frames", "4800"]


def running() -> dict[tuple[int, str], int]:
    """Every process running on this machine (not a zombie: that has exited), as its pid and
    start time (a pid used again later is another process), with its parent's pid."""
    procs = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # after the command's closing parenthesis: state, ppid, ... starttime (22nd field)
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            procs[(int(stat.parent.name), fields[19])] = int(fields[1])
    return procs


def descendants(pid: int) -> set[tuple[int, str]]:
    """Every process under ``pid``: its children, theirs, and so on."""
    procs, found, parents = running(), set(), {pid}
    while parents:
        children = {proc for proc, ppid in procs.items() if ppid in parents} - found
        found |= children
        parents = {child for child, _ in children}
    return found


SPREAD = ["--set", "run.resume_spread=64"]  # kept by each bare --resume, which says so


def kill_and_resume(
    run_dir: Path, start: list[str], kills: list[tuple[int, Callable]], restart: str
) -> dict:
    """train.py ``start`` in ``run_dir``, killed by each ``kill(proc)`` once it has trained
    its frames, resumed in place each time with a bare --resume, then run to its end;
    asserts that nothing of a killed run is left running, nor its shared memory at the end,
    that the last resume said how its restarted envs began (the ``restart`` field's line),
    and that the end is one run of the first start's preset. The final summary."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    checkpoint = str(run_dir / "checkpoint.pt")
    starts = [[*start, "--run-dir", str(run_dir)]] + [["--resume", checkpoint]] * len(kills)
    shm_before, first_preset = shm_segments(), None
    for (kill_at, kill), args in zip(kills, starts, strict=False):
        proc = start_training(*args)
        try:
            wait_until_training(proc, run_dir, frames=kill_at)
            spawned = descendants(proc.pid)
            kill(proc)
            proc.communicate(timeout=60)
            deadline = time.monotonic() + 10  # an orphan actor waits WAIT s for credits
            while (left := spawned & running().keys()) and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        assert not left, f"processes of the killed run left running: {left}"
        first_preset = first_preset or load_checkpoint(checkpoint).preset
    # the evaluations the last checkpoint holds
    kept = load_checkpoint(checkpoint).stats["record"]["evaluations"]
    assert kept
    out = train("--resume", checkpoint)
    assert out.returncode == 0, out.stderr
    assert restart in out.stdout  # the restarted envs were brought back, or played apart
    assert_no_shm_left(shm_before, out.stderr)
    s = summary(run_dir)
    assert len(s["resumed_at_steps"]) == len(kills)  # each resume, where it went on
    assert s["resumed_at_steps"] == sorted(s["resumed_at_steps"])
    assert s["evaluations"][: len(kept)] == kept
    assert s["steps"] >= first_preset["run"]["steps"] and s["preset"] == first_preset
    evaluations = [e["steps"] for e in s["evaluations"]]
    assert evaluations == sorted(set(evaluations)), "every evaluation once"
    rows = (run_dir / "scores.csv").read_text().splitlines()
    assert rows[0] == "seconds,steps,score,smoothed"
    table = [row.split(",") for row in rows[1:]]
    frames = [int(row[1]) for row in table]
    assert frames == sorted(frames), "no row of a replayed stretch left behind"
    assert len(frames) == s["episodes"] > 0, "every game counted has its row"
    # Each row's smoothed score follows from the row before: a stretch logged twice, or a
    # row lost, would break the chain (two games can end on one step with equal rows).
    replayed = Scores(stop_reward=18.0)
    for seconds, _, score, logged in table:
        replayed.add(Game(float(score), 0), 0.0, 0)
        assert float(logged) == pytest.approx(replayed.smoothed, abs=1e-4), f"row at {seconds} s"
    events = EventAccumulator(str(run_dir), purge_orphaned_data=True).Reload()
    steps = [e.step for e in events.Scalars("episode/reward")]
    assert steps == frames, "TensorBoard's games are scores.csv's, forward only"
    return s


def kill_the_learner(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)  # train.py alone, as the OOM killer would


def kill_the_group(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)  # every process of the run, its resource tracker too


def test_a_run_killed_and_resumed_in_place_is_one_run(tmp_path):
    start = ["--preset", "pong-nenv", "--envs", "8", *KILLED, *SPREAD]
    # the last checkpoint resumed holds the evaluation at 2400 frames (finished by 3600)
    kills = [(1500, kill_the_learner), (3700, kill_the_group)]
    # n-env mode's checkpoints hold the envs' phases: resume_phases, not the spread
    s = kill_and_resume(tmp_path, start, kills, "run.resume_phases")
    assert (s["envs"], s["precision"], s["mode"]) == (8, "fp32", "n-env")


def test_a_parallel_run_killed_and_resumed_in_place_is_one_run(tmp_path):
    # The actor process must go with the learner, and the run's shared memory with the run.
    start = ["--preset", "pong-parallel", "--set", "run.actors=1", "--envs", "4", *KILLED, *SPREAD]
    kills = [(1500, kill_the_learner), (3700, kill_the_group)]
    s = kill_and_resume(tmp_path, start, kills, "run.resume_spread")
    assert (s["envs"], s["precision"], s["mode"]) == (4, "fp32", "parallel")
    assert s["choices"]["actors"] == 1


def test_profile_covers_the_wall_time_and_changes_no_result(nenv_run, tmp_path):
    out = train_here(
        "--preset", "pong-nenv", "--frames", "600", "--run-dir", str(tmp_path), "--profile", *TINY
    )
    assert out.returncode == 0, out.stderr
    # Same seed, sync backend: profiling must not change what is learned.
    plain, profiled = (load_checkpoint(d / "checkpoint.pt") for d in (nenv_run, tmp_path))
    assert plain.net.keys() == profiled.net.keys()
    for key, value in plain.net.items():
        assert torch.equal(value, profiled.net[key]), key
    assert summary(tmp_path)["episodes"] == summary(nenv_run)["episodes"]
    report = json.loads((tmp_path / "profile.json").read_text())["processes"]["main"]
    rows = {r["stage"]: r for r in report["rows"]}
    # Exclusive times: no second is counted twice, so the timed rows never pass the wall
    # (each row is rounded to 0.1 ms). How much is left untimed depends on the machine's
    # load, so it is not asserted; tests/core/test_timing.py checks the split exactly.
    assert rows["untimed (loop overhead)"]["seconds"] >= -1e-3 * len(rows)
    for stage in ("sgd step", "action selection", "replay sample", "env step/emulator"):
        assert rows[stage]["calls"] > 0, stage
    assert rows["sgd step"]["calls"] == 133 and rows["env step/WarpFrame"]["calls"] == 600
    assert "| sgd step | 133 |" in out.stdout  # the printed table
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = EventAccumulator(str(tmp_path)).Reload().Tags()["scalars"]
    assert "profile/sgd_step" in tags and "profile/env_step/emulator" in tags


def test_resume_with_another_network_is_refused_in_one_line(nenv_run, tmp_path):
    out = train_here(
        "--preset",
        "pong-nenv",
        "--run-dir",
        str(tmp_path),
        "--resume",
        str(nenv_run / "checkpoint.pt"),
        *TINY,
        "--set",
        "dqn.network='nature'",
    )
    assert out.returncode == 2
    assert (
        out.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "train.py: error: --resume: the checkpoint's network does not fit this preset's"
        )
    )
    assert "'network': 'nature'" in out.stderr and "'network': 'nips'" in out.stderr
    RunDirLock(tmp_path).acquire().release()  # refused after taking the lock: let go of it


def test_baseline_mode_runs_on_ptan(tmp_path):
    out = train_here(
        "--preset",
        "pong-baseline",
        "--frames",
        "400",
        "--run-dir",
        str(tmp_path),
        "--profile",
        *TINY,
    )
    assert out.returncode == 0, out.stderr
    s = summary(tmp_path)
    assert s["mode"] == "baseline" and s["envs"] == 1 and s["steps"] == 400
    data = load_checkpoint(tmp_path / "checkpoint.pt")
    # One update per frame after the first 200 (the replay's warm-up): frames 201..400.
    assert data.learner["updates"] == 200
    # ptan steps the env inside populate(): its stages still get their own rows
    report = json.loads((tmp_path / "profile.json").read_text())["processes"]["main"]
    rows = {r["stage"]: r for r in report["rows"]}
    assert rows["sgd step"]["calls"] == 200 and rows["action selection"]["calls"] >= 400
    assert rows["ptan populate/WarpFrame"]["calls"] >= 400 and "ptan populate/rest" in rows


def start_training(*args: str) -> subprocess.Popen:
    """train.py in its own process group, as a terminal would run it."""
    return start_script("train.py", *args)


def wait_until_training(
    proc: subprocess.Popen,
    run_dir: Path,
    frames: int = 100,
    until: Callable[[dict], bool] | None = None,
) -> dict:
    """summary.json once the run has trained ``frames`` (and ``until(summary)`` holds)."""
    # Generous: only a run that never gets going should reach it, not a slow machine.
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        if (run_dir / "summary.json").exists():
            s = summary(run_dir)
            if s["steps"] >= frames and (until is None or until(s)):
                return s
    raise AssertionError(f"no training progress; stderr: {proc.communicate()[1][-2000:]}")


def interrupt_training(
    proc: subprocess.Popen,
    run_dir: Path,
    act: Callable[[dict], None],
    timeout: float,
    until: Callable[[dict], bool] | None = None,
) -> tuple[dict, str]:
    """Once the run trains (and ``until`` holds), ``act(summary)`` on it; wait up to
    ``timeout`` for it to exit, killing its process group if it does not. Returns the
    summary acted on and the run's stderr."""
    try:
        s = wait_until_training(proc, run_dir, until=until)
        act(s)
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return s, err


def ctrl_c(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's: the whole process group


def kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGTERM)  # as `kill PID`: train.py's own process only


@pytest.mark.parametrize(
    "mode", [["--preset", "pong-nenv"], ["--preset", "pong-parallel", "--set", "run.actors=2"]]
)
@pytest.mark.parametrize("stop", [ctrl_c, kill])
def test_ctrl_c_or_kill_saves_a_checkpoint_and_exits_130(tmp_path, mode, stop):
    before = shm_segments()
    proc = start_training(*mode, "--frames", "10000000", "--run-dir", str(tmp_path), *TINY)
    s, err = interrupt_training(proc, tmp_path, lambda _: stop(proc), timeout=60)
    actors = s["choices"].get("actor_pids", [])
    assert proc.returncode == 130, err
    assert "checkpoint.pt saved" in err and "Traceback" not in err
    assert_no_shm_left(before, err)
    data = load_checkpoint(tmp_path / "checkpoint.pt")
    assert data.frames > 0 and data.frames == summary(tmp_path)["steps"]
    for pid in actors:  # stopped and reaped by train.py, not left to the init process
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "pong-fats"], "preset 'pong-fats': no such preset (did you mean pong-fast?)"),
        (["--set", "dqn.batchsize=64"], "[dqn] unknown key 'batchsize' (did you mean batch_size?)"),
        (["--set", "dqn.batch_size=big"], "batch_size = 'big' has type str; expected int"),
        (["--set", "dqn.gamma=1.5"], "gamma = 1.5 is out of range; expected in [0.0, 1.0]"),
        (["--set", "pqn.updates_at_start=nan"], "updates_at_start = nan is out of range"),
        (["--set", "training.lr=1"], "unknown section [training]; allowed: run, env, dqn"),
        (["--set", "replay.initial=500000"], "[replay] initial = 500000 exceeds size = 100000"),
        (["--set", "env.backend='threads'"], "backend = 'threads'; allowed: sync | subprocess"),
        (["--set", "dqn"], "--set 'dqn': expected section.key=value"),
        (["--set", "env.game='pongg'"], "game 'pongg': unknown Atari game; did you mean pong?"),
    ],
)
def test_bad_presets_fail_at_start_with_one_line(args, message):
    import io
    from contextlib import redirect_stderr

    from atari_speed.app.cli import train_main

    err = io.StringIO()
    with redirect_stderr(err):
        code = train_main(["--preset", "pong-nenv", *args] if "--preset" not in args else args)
    assert code == 2
    text = err.getvalue()
    assert message in text and text.count("\n") == 1 and text.startswith("train.py: error: ")


def test_bad_preset_file_names_the_file(tmp_path):
    from atari_speed.core.config import load_preset

    path = tmp_path / "mine.toml"
    path.write_text("[run]\nmode = 'turbo'\n")
    with pytest.raises(
        ConfigError,
        match=r"mine\.toml: \[run\]: mode = 'turbo'; allowed: "
        r"baseline \| n-env \| parallel",
    ):
        load_preset(path)


def test_help_documents_every_flag_and_field():
    out = train("--help")
    assert out.returncode == 0
    for text in (
        "--preset",
        "--mode",
        "--envs",
        "--steps",
        "--emulator-frames",
        "--frames",
        "--device",
        "--seed",
        "--run-dir",
        "--resume",
        "--set",
        "[dqn]",
        "train_every",
        "agent steps per SGD update",
    ):
        assert text in out.stdout


def test_corrupt_checkpoint_is_refused_in_one_line(tmp_path, nenv_run):
    good = (nenv_run / "checkpoint.pt").read_bytes()
    truncated = tmp_path / "cut.pt"
    truncated.write_bytes(good[: len(good) // 2])
    with pytest.raises(ConfigError, match=r"cut\.pt: not a readable checkpoint"):
        load_checkpoint(truncated)
    foreign = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, foreign)
    with pytest.raises(ConfigError, match=r"other\.pt: not an atari-speed checkpoint"):
        load_checkpoint(foreign)
    whole = tmp_path / "whole.pt"  # the same bytes, uncut, load: the cut is what is refused
    whole.write_bytes(good)
    assert load_checkpoint(whole).frames == 600


def test_parallel_mode_two_actors_end_to_end_keeps_the_presets_update_to_data_ratio(tmp_path):
    # pong-nenv (one update per 3 frames after the warm-up) in parallel mode with two actor
    # processes: it must keep its preset's ratio, not the parallel preset's one per frame.
    # Actor processes may run ahead of the learner by their frame credits
    # (UpdateSchedule.actor_credits) when the run stops, and no further.
    from atari_speed.agent.schedules import UpdateSchedule

    before = shm_segments()
    out = train(
        "--preset", "pong-nenv", "--mode", "parallel", "--frames", "350",
        "--run-dir", str(tmp_path), "--set", "run.actors=2", "--set", "run.envs=2",
        "--profile", *TINY,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert_no_shm_left(before, out.stderr)
    s = summary(tmp_path)
    assert s["mode"] == "parallel" and s["envs"] == 4 and s["steps"] >= 350
    assert s["choices"]["actors"] == 2 and s["choices"]["envs_per_actor"] == 2
    processes = json.loads((tmp_path / "profile.json").read_text())["processes"]
    assert set(processes) == {"main", "actor 0", "actor 1"}
    for name, report in processes.items():  # exclusive times: none counted twice
        rows = {r["stage"]: r for r in report["rows"]}
        assert rows["untimed (loop overhead)"]["seconds"] >= -1e-3 * len(rows), name
        work = "sgd step" if name == "main" else "env step/emulator"  # learner, actors
        assert rows[work]["calls"] > 0, name
    actor = {r["stage"]: r for r in processes["actor 0"]["rows"]}
    assert actor["wait for frame credits"]["calls"] > 0 and actor["env step/emulator"]["calls"]
    assert s["update_to_data"] == {"batch_size": 96, "train_every": 3, "samples_per_frame": 32.0}
    data = load_checkpoint(tmp_path / "checkpoint.pt")
    schedule = UpdateSchedule(train_every=3, initial=200, batch=32)
    due, updates = schedule.due(data.frames), data.learner["updates"]
    lead = schedule.actor_credits(s["envs"]) // schedule.train_every + 1
    assert due - lead <= updates <= due and updates > 0
    for pid in s["choices"]["actor_pids"]:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_parallel_mode_without_actor_processes_is_n_env_mode(tmp_path):
    out = train_here(
        "--preset",
        "pong-parallel",
        "--frames",
        "300",
        "--run-dir",
        str(tmp_path),
        "--set",
        "run.actors=0",
        *TINY,
    )
    assert out.returncode == 0, out.stderr
    data = load_checkpoint(tmp_path / "checkpoint.pt")
    assert data.frames == 300 and data.learner["updates"] == 100  # 300 - 200 warm-up
    s = summary(tmp_path)
    assert s["mode"] == "n-env" and any("run.actors = 0" in why for why in s["choices"]["why"])


def test_killed_actor_stops_the_run_with_a_checkpoint_and_no_orphans(tmp_path):
    before = shm_segments()
    proc = start_training(
        "--preset",
        "pong-parallel",
        "--frames",
        "10000000",
        "--run-dir",
        str(tmp_path),
        "--set",
        "run.actors=2",
        *TINY,
    )
    # A run that failed to notice would train its 10M frames: the deadline catches that
    # without timing a run that did notice.
    s, err = interrupt_training(
        proc,
        tmp_path,
        lambda s: os.kill(s["choices"]["actor_pids"][1], signal.SIGKILL),
        timeout=240,
    )
    pids = s["choices"]["actor_pids"]
    assert proc.returncode == 1
    assert f"actor 1 (pid {pids[1]}) died with exit code -9" in err
    assert "Traceback" not in err
    assert_no_shm_left(before, err)
    assert load_checkpoint(tmp_path / "checkpoint.pt").frames > 0
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)


def test_actor_errors_are_reported_naming_the_actor():
    import multiprocessing as mp

    from atari_speed.core.errors import WorkerError
    from atari_speed.run.parallel import actor_main
    from atari_speed.run.shared import SharedSpec, drain

    games = mp.get_context("spawn").Queue()
    spec = SharedSpec(
        capacity=100,
        columns=1,
        frame_shape=(1, 84, 84),
        k=4,
        n_steps=1,
        gamma=0.99,
        actors=1,
        weights=10,
        start_frames=0,
        data_shm="no-such-block",
        small_shm="no-such-block",
    )
    actor_main(3, None, spec, None, games)
    # The queue's feeder thread delivers the error when it gets to it: poll for it.
    deadline = time.monotonic() + 120
    with pytest.raises(WorkerError, match=r"actor 3 failed: FileNotFoundError"):
        while time.monotonic() < deadline:
            assert drain(games) == [], "no game was played"
            time.sleep(0.05)


def test_evaluation_runs_beside_training_and_picks_best_pt(tmp_path):
    # Evaluation (1 game every 300 frames) runs in a background thread while the run
    # trains on; the run is stopped once one has finished, however long that took here.
    proc = start_training(
        "--preset", "pong-nenv", "--frames", "10000000", "--run-dir", str(tmp_path),
        "--set", "eval.every=300", "--set", "eval.episodes=1", *TINY,
    )  # fmt: skip
    _, err = interrupt_training(
        proc,
        tmp_path,
        lambda _: ctrl_c(proc),
        timeout=120,
        until=lambda s: s["eval_reward"] is not None,
    )
    assert proc.returncode == 130, err
    s = summary(tmp_path)
    assert -21 <= s["eval_reward"] <= 21 and s["evaluations"]
    # training went on while the evaluation played: it began at 300 frames and more were
    # trained before the run was stopped
    assert s["evaluations"][0]["steps"] >= 300 and s["steps"] > s["evaluations"][0]["steps"]
    # the one game's score is recorded beside the mean
    assert s["evaluations"][0]["games"] == [s["evaluations"][0]["reward"]]
    # and when it began on the run's CPU clock, from which its share of the CPU is counted
    assert 0 < s["evaluations"][0]["run_cpu_seconds"] <= s["cpu_seconds"]
    assert 0 < s["eval_cpu_share"] < 1
    assert s["fps_after_warmup"] is not None and s["fps_after_warmup"] > 0
    best = load_checkpoint(tmp_path / "best.pt")
    assert best.learner is None and best.net, "best.pt holds weights only"


def test_one_presets_update_to_data_ratio_holds_in_parallel_mode_without_actors(tmp_path):
    # pong-nenv in parallel mode with no actor processes runs the n-env loop, at pong-nenv's
    # one update per 3 frames after the warm-up (with actors: the end-to-end test above).
    from atari_speed.agent.schedules import UpdateSchedule

    args = ["--preset", "pong-nenv", "--mode", "parallel", "--frames", "500"]
    out = train_here(*args, "--run-dir", str(tmp_path), "--set", "run.actors=0", *TINY)
    assert out.returncode == 0, out.stderr
    s = summary(tmp_path)
    assert s["update_to_data"] == {"batch_size": 96, "train_every": 3, "samples_per_frame": 32.0}
    data = load_checkpoint(tmp_path / "checkpoint.pt")
    schedule = UpdateSchedule(train_every=3, initial=200, batch=32)
    assert s["mode"] == "n-env" and data.learner["updates"] == schedule.due(data.frames)


@contextlib.contextmanager
def run_here(run_dir: Path, overrides: list[str]) -> Iterator:
    """pong-nenv with ``overrides`` as a Run in this process; on the way out its evaluation
    is cancelled and the envs evaluations kept are closed, its tracker closed and its
    directory's lock released."""
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan
    from atari_speed.run.session import Run

    run = Run(make_plan(load_preset("pong-nenv", overrides)), run_dir)
    try:
        yield run
    finally:
        run.end_evaluations()
        run.tracker.close()
        run.lock.release()


def test_best_pt_holds_the_weights_that_were_evaluated_not_the_later_ones(tmp_path):
    # In-process and without a clock: an evaluation starts on the current weights, the
    # weights then move on (as training does), and once its game is over best.pt must
    # hold the weights it played with.
    overrides = ["run.envs=1", "eval.every=10", "eval.episodes=1", "eval.from_reward=-1000"]
    with run_here(tmp_path, overrides) as run:
        run.tracker.advance(10)
        run.periodic(0.0)
        assert run.evaluation is not None, "due at 10 frames"
        evaluated = {k: v.cpu().clone() for k, v in run.learner.net.state_dict().items()}
        with torch.no_grad():
            for p in run.learner.net.parameters():
                p.add_(1.0)
        deadline = time.monotonic() + 600  # a whole game of Pong; only a hang gets here
        while run.evaluation is not None:
            assert time.monotonic() < deadline, "the evaluation game never ended"
            time.sleep(0.1)
            run.periodic(0.0)
        best = load_checkpoint(tmp_path / "best.pt")
        assert best.learner is None and best.net.keys() == evaluated.keys()
        for key, value in evaluated.items():
            assert torch.equal(best.net[key], value), key


# pong-nenv evaluating every 10 agent steps from the start, one game from every start
EVERY_START = [
    "run.envs=1", "eval.every=10", "eval.from_reward=-1000", "eval.every_start=true",
    "eval.epsilon=0.0", "eval.max_frames=400", "env.pipeline='small'",
]  # fmt: skip


def test_the_envs_every_start_evaluations_keep_are_closed_on_the_way_out(tmp_path, monkeypatch):
    # Every-start evaluations play again on the envs the first made; the run's way out
    # (finish: done, Ctrl-C, SIGTERM or an error) cancels the one playing and closes them.
    from atari_speed.run import evaluation as evaluation_module
    from atari_speed.run.training import finish

    with run_here(tmp_path, EVERY_START) as run:
        run.tracker.advance(10)
        run.periodic(0.0)
        assert run.evaluation is not None, "due at 10 agent steps"
        run.evaluation.wait()
        run.periodic(0.0)
        envs = list(run.eval_envs.envs)
        assert len(envs) == MERGING_ENVS and run.evaluation is None, "kept"
        playing = threading.Event()

        def play_until_stopped(envs, net, device, options, max_frames, stop=None, **cut):
            playing.set()
            stop.wait(60)
            return [], 0

        monkeypatch.setattr(evaluation_module, "play_merging", play_until_stopped)
        run.tracker.advance(10)
        run.periodic(0.0)  # the next, still playing when the run ends
        assert run.evaluation is not None and playing.wait(60)
        closed = []
        for env in envs:
            env.close = lambda env=env, close=env.close: (closed.append(env), close())
        finish(run, failing=False)
        assert run.evaluation.finished(), "cancelled"
        assert run.eval_envs.envs == [] and len(closed) == MERGING_ENVS


def test_an_evaluation_that_cannot_reach_the_stop_reward_is_cut_short_and_never_best(tmp_path):
    # eval.max_game_score: an untrained agent's evaluation stops once its games have lost
    # too many of Pong's 21 points to average run.stop_reward (18). It is recorded as the
    # most its mean could have been, and neither best.pt nor the greedy solve follows it.
    overrides = [*EVERY_START, "eval.max_game_score=21.0", "eval.max_frames=3000"]
    with run_here(tmp_path, overrides) as run:
        assert run.cutoff() is not None and run.cutoff(final=True) is None, "the final plays out"
        run.tracker.advance(10)
        run.periodic(0.0)
        assert run.evaluation is not None
        run.evaluation.wait()
        run.periodic(0.0)
        entry = run.tracker.record.evaluations[-1]
        assert entry["at_most"] and entry["games"] == [] and entry["reward"] < 18.0
        assert run.tracker.best_eval is None and run.tracker.record.eval_solved_at is None
        assert not (tmp_path / "best.pt").exists()
        assert "greedy <=" in run.tracker.progress_line()
        run.tracker.record.eval_solved_at = (1.0, 10)  # once one has reached it: played out
        assert run.cutoff() is None


def test_kept_envs_stay_open_while_an_evaluation_outlives_its_cancel(tmp_path, monkeypatch):
    # A game that does not heed the stop (an emulator stuck in a step) must not have its
    # envs closed under it: they are left to the process's exit.
    from atari_speed.run import evaluation as evaluation_module

    release, playing = threading.Event(), threading.Event()

    def play_past_stop(envs, net, device, options, max_frames, stop=None, **cut):
        playing.set()
        release.wait(60)
        return [], 0

    monkeypatch.setattr(evaluation_module, "play_merging", play_past_stop)
    monkeypatch.setattr(evaluation_module.Evaluation, "cancel", lambda self: self.stop.set())
    with run_here(tmp_path, EVERY_START) as run:
        run.tracker.advance(10)
        run.periodic(0.0)
        assert run.evaluation is not None and playing.wait(60)
        envs = list(run.eval_envs.envs)
        run.end_evaluations()
        assert run.eval_envs.envs == envs and len(envs) == MERGING_ENVS, "left open while it plays"
        release.set()
        run.evaluation.wait()
        run.end_evaluations()
        assert run.eval_envs.envs == [], "closed once it is over"


def test_an_evaluation_waits_for_the_run_cpu_that_its_share_allows(tmp_path):
    # eval.max_cpu_share 0.05: the one evaluation so far took 1 CPU second, so the next
    # (guessed at 1 too) waits until the run has used 40 since that one began, even with
    # its agent steps due.
    overrides = [
        "run.envs=1", "eval.every=10", "eval.episodes=1", "eval.from_reward=-1000",
        "eval.max_cpu_share=0.05",
    ]  # fmt: skip
    with run_here(tmp_path, overrides) as run:
        now = run.tracker.cpu_seconds
        last = {"steps": 0, "reward": -21.0, "cpu_seconds": 1.0, "run_cpu_seconds": now}
        run.tracker.record.evaluations.append(last)
        run.tracker.advance(10)
        run.periodic(0.0)
        assert run.evaluation is None, "due by agent steps, not by CPU"
        last["run_cpu_seconds"] = now - 39.0
        run.periodic(0.0)
        assert run.evaluation is None, "39 CPU seconds since the last began"
        last["run_cpu_seconds"] = now - 40.0
        run.periodic(0.0)
        assert run.evaluation is not None, "40 CPU seconds since the last began"
        assert run.evaluation.run_cpu_seconds >= now


def test_the_final_evaluation_waits_for_the_one_in_progress_then_plays_the_last_weights(
    tmp_path,
):
    # eval.at_end: the evaluation still playing at the end is recorded, not cancelled, and
    # the final weights, which it did not play, get one of their own, marked final; best.pt
    # holds the best of the two. Without at_end, or just after one of these weights, none.
    overrides = [
        "run.envs=1", "eval.every=10", "eval.episodes=1", "eval.from_reward=-1000",
        "eval.at_end=true",
    ]  # fmt: skip
    with run_here(tmp_path, overrides) as run:
        run.tracker.advance(10)
        run.periodic(0.0)
        assert run.evaluation is not None, "due at 10 agent steps"
        with torch.no_grad():
            for p in run.learner.net.parameters():
                p.add_(1.0)
        final_weights = {k: v.clone() for k, v in run.learner.net.state_dict().items()}
        run.tracker.advance(5)  # the loop ends at 15 agent steps, the evaluation still on
        run.final_evaluation()
        assert run.evaluation is None
        first, final = run.tracker.record.evaluations
        assert first["steps"] == 10 and "final" not in first
        assert final["steps"] == 15 and final["final"] is True and len(final["games"]) == 1
        best = load_checkpoint(tmp_path / "best.pt")
        if final["reward"] > first["reward"]:
            for key, value in final_weights.items():
                assert torch.equal(best.net[key], value), key
        run.final_evaluation()
        assert len(run.tracker.record.evaluations) == 2, "its weights were just evaluated"


def test_without_at_end_or_before_from_reward_there_is_no_final_evaluation(tmp_path):
    # (eval.every = 0: the final evaluation does not need evaluations on)
    for name, extra in (("off", "eval.at_end=false"), ("early", "eval.from_reward=0")):
        overrides = ["run.envs=1", "eval.every=0", "eval.at_end=true", extra]
        with run_here(tmp_path / name, overrides) as run:
            run.tracker.advance(10)
            run.final_evaluation()
            assert run.evaluation is None and run.tracker.record.evaluations == [], name


def test_train_ends_with_the_final_evaluation_of_the_last_weights(tmp_path):
    # Through train.py with evaluations off during the run (eval.every = 0):
    # the one recorded is the final one, of the weights at the last step, and best.pt
    # holds them.
    args = ["--preset", "pong-nenv", "--frames", "600", "--run-dir", str(tmp_path), *TINY]
    evals = ["--set", "eval.every=0", "--set", "eval.episodes=1"]
    evals += ["--set", "eval.from_reward=-1000", "--set", "eval.at_end=true"]
    out = train_here(*args, *evals)
    assert out.returncode == 0, out.stderr
    s = summary(tmp_path)
    [final] = s["evaluations"]
    assert final["final"] is True and final["steps"] == s["steps"]
    # the run's clocks stopped where the final evaluation began: its FPS leaves it out
    assert s["seconds"] == final["seconds"] and s["cpu_seconds"] == final["run_cpu_seconds"]
    assert s["eval_cpu_share"] is None, "the final one is not counted"
    assert "final evaluation: 1 game of the weights at agent step 600" in out.stderr
    best, last = load_checkpoint(tmp_path / "best.pt"), load_checkpoint(tmp_path / "checkpoint.pt")
    for key, value in last.net.items():
        assert torch.equal(best.net[key], value), key


def every_weight_up_by_one(net: torch.nn.Module) -> Callable[..., None]:
    """A stand-in for the learner's update: every weight of ``net`` up by 1, so that the
    weights and their moving average part by a known amount."""

    def update(*_: object) -> None:
        with torch.no_grad():
            for p in net.parameters():
                p.add_(1.0)

    return update


def test_evaluations_play_the_average_of_the_weights_and_a_resume_keeps_it(tmp_path, capsys):
    # eval.average_steps: what an evaluation copies is the average, which each learn
    # moves by the agent steps since the last; checkpoint.pt carries it to a resume.
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan
    from atari_speed.run.session import Run

    overrides = [
        "run.envs=1", "eval.every=10", "eval.episodes=1", "eval.from_reward=-1000",
        "eval.snapshots=true", "eval.average_steps=100",
    ]  # fmt: skip
    plan = make_plan(load_preset("pong-nenv", overrides))
    run = Run(plan, tmp_path / "a")

    run.learner.learn = every_weight_up_by_one(run.learner.net)
    try:
        start = {k: v.clone() for k, v in run.learner.net.state_dict().items()}
        run.tracker.advance(100)
        run.learn(None)
        moved = 1.0 - float(torch.exp(torch.tensor(-1.0)))
        for key, value in run.average.weights.items():
            assert torch.allclose(value, start[key] + moved), key
        run.periodic(0.0)
        assert run.evaluation is not None, "due at 10 agent steps"
        for key, value in run.evaluation.net_state.items():
            assert torch.equal(value, run.average.weights[key]), key
            assert not torch.equal(value, run.learner.net.state_dict()[key]), key
        # eval.snapshots: the weights as they are and their average, each in its file
        raw = load_checkpoint(tmp_path / "a" / "snapshots" / "100.pt")
        average = load_checkpoint(tmp_path / "a" / "snapshots" / "100-average.pt")
        assert raw.frames == average.frames == 100 and raw.learner is None
        for key, value in run.learner.net.state_dict().items():
            assert torch.equal(raw.net[key], value), key
            assert torch.equal(average.net[key], run.average.weights[key]), key
        run.evaluation.cancel()
        run.evaluation = None
        run.checkpoint()
    finally:
        run.tracker.close()
        run.lock.release()
    saved = {k: v.clone() for k, v in run.average.weights.items()}
    resumed = Run(plan, tmp_path / "b", resume=str(tmp_path / "a" / "checkpoint.pt"))
    try:
        assert resumed.average.at == 100
        for key, value in saved.items():
            assert torch.equal(resumed.average.weights[key], value), key
    finally:
        resumed.tracker.close()
        resumed.lock.release()
    # a checkpoint without an average (eval.average_steps off, or an older app's) resumes
    # with the average started from its weights, and says so
    off = make_plan(load_preset("pong-nenv", overrides[:-1]))
    plain = Run(off, tmp_path / "c")
    plain.checkpoint()
    plain.tracker.close()
    plain.lock.release()
    assert load_checkpoint(tmp_path / "c" / "checkpoint.pt").average is None
    capsys.readouterr()
    again = Run(plan, tmp_path / "d", resume=str(tmp_path / "c" / "checkpoint.pt"))
    try:
        assert "holds no average of the weights" in capsys.readouterr().out
        for key, value in again.learner.net.state_dict().items():
            assert torch.equal(again.average.weights[key], value), key
    finally:
        again.tracker.close()
        again.lock.release()


def test_evaluations_play_the_weights_below_eval_average_from_and_the_average_from_it(tmp_path):
    # eval.average_from: below the smoothed score set, an evaluation copies the weights
    # as they are; from it, their average; each evaluation's entry says which it played
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan
    from atari_speed.run.session import Run

    overrides = [
        "run.envs=1", "eval.every=10", "eval.episodes=1", "eval.from_reward=-1000",
        "eval.average_steps=100", "eval.average_from=5.0", "eval.max_frames=200",
    ]  # fmt: skip
    run = Run(make_plan(load_preset("pong-nenv", overrides)), tmp_path / "a")

    run.learner.learn = every_weight_up_by_one(run.learner.net)
    try:
        run.tracker.advance(100)
        run.learn(None)
        played = []
        for smoothed in (None, 4.9, 5.0, 12.0, 4.0):
            run.tracker.scores.smoothed = smoothed
            run._start_evaluation()
            evaluation = run.evaluation
            assert evaluation is not None
            average = evaluation.average
            want = run.average.weights if average else run.learner.net.state_dict()
            for key, value in evaluation.net_state.items():
                assert torch.equal(value, want[key]), key
            evaluation.wait()
            run._record_evaluation()
            played.append(average)
        assert played == [False, False, True, True, False]
        entries = run.tracker.record.evaluations
        assert [e["average"] for e in entries] == played
    finally:
        run.tracker.close()
        run.lock.release()
    # the default, -1000: the average from the start, as before the field
    plan = make_plan(load_preset("pong-nenv", overrides[:-2]))
    again = Run(plan, tmp_path / "b")
    try:
        again.tracker.scores.smoothed = None
        assert again.evaluates_average()
    finally:
        again.tracker.close()
        again.lock.release()


def test_the_actor_plays_with_the_average_from_the_score_set_and_not_below(tmp_path):
    # pqn.act_with_average: from a smoothed score of pqn.act_average_from the actor acts
    # with the average's network, and with the weights as they are again if it slips back
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan
    from atari_speed.run.session import Run

    overrides = ["run.envs=1", "eval.average_steps=100", "pqn.act_with_average=true"]
    overrides += ["pqn.act_average_from=5.0"]
    plan = make_plan(load_preset("pong-fast", [*overrides, "run.mode='n-env'", *AUTO_OFF]))
    run = Run(plan, tmp_path / "a")
    acted_with: list[object] = []
    run.actor = SimpleNamespace(act_with=acted_with.append)
    run.learner.learn = lambda *_: None
    try:
        for smoothed in (None, 4.9, 5.0, 12.0, 4.0):
            run.tracker.scores.smoothed = smoothed
            run.tracker.advance(10)
            run.learn(None)
        assert acted_with == [None, None, run.average.net, run.average.net, None]
    finally:
        run.tracker.close()
        run.lock.release()


@pytest.mark.parametrize("follow", [False, True])
def test_a_greedy_evaluation_at_the_stop_reward_has_the_evaluated_agent_play(tmp_path, follow):
    # pqn.follow_greedy: from a greedy evaluation at run.stop_reward on, the training games
    # are played as at the stop reward (the average, epsilon at explore.epsilon_at_stop),
    # however far the smoothed score lags; an evaluation below it gives that back
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan
    from atari_speed.run.session import Run

    overrides = ["run.envs=1", "run.mode='n-env'", f"pqn.follow_greedy={str(follow).lower()}"]
    run = Run(make_plan(load_preset("pong-fast", [*overrides, *AUTO_OFF])), tmp_path / "a")
    explore = run.preset.explore
    acted_with: list[object] = []
    run.actor = SimpleNamespace(act_with=acted_with.append)
    run.learner.learn = lambda *_: None
    try:
        run.tracker.advance(explore.epsilon_steps)  # past the step schedule
        run.tracker.scores.smoothed = 5.0  # below every score the preset's schedules use
        for greedy in (None, 18.5, 17.0):
            run.tracker.record.eval_reward = greedy
            run.learn(None)
            solved = follow and greedy == 18.5
            expected = explore.epsilon_at_stop if solved else explore.epsilon_final
            assert run.epsilon == pytest.approx(expected, abs=1e-12)
        followed = [None, run.average.net if follow else None, None]
        assert acted_with == followed
    finally:
        run.tracker.close()
        run.lock.release()


def _evaluation_done(run, score: float, average: bool) -> tuple[dict, dict]:
    """A finished evaluation of weights other than the learner's (each float + 1) that
    scored ``score``, in ``run``: the learner's weights before it, and the evaluated."""
    before = {k: v.clone() for k, v in run.learner.net.state_dict().items()}
    evaluated = {k: v + 1.0 if v.is_floating_point() else v for k, v in before.items()}
    run.evaluation = SimpleNamespace(
        result=lambda: score, frames=1000, seconds=1.0, cpu_seconds=1.0, scores=[score],
        run_cpu_seconds=2.0, average=average, net_state=evaluated, at_most=None,
    )  # fmt: skip
    return before, evaluated


@pytest.mark.parametrize(
    ("follow", "average", "score", "adopted", "margin"),
    [(True, True, 18.5, True, 0.0), (True, True, 17.9, False, 0.0),
     (True, False, 19.0, False, 0.0), (False, True, 19.0, False, 0.0),
     (True, True, 18.5, False, 1.0), (True, True, 19.0, True, 1.0)],
)  # fmt: skip
def test_an_average_evaluated_at_the_stop_reward_becomes_the_learners_weights(
    tmp_path, follow, average, score, adopted, margin
):
    # pqn.follow_greedy (learning on: no pqn.hold_at_greedy): the weights' average that a
    # greedy evaluation found at run.stop_reward is where the learner goes on from; not
    # below it, not the weights as they are (nothing to adopt), not without the field
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan
    from atari_speed.run.session import Run

    overrides = ["run.envs=1", "run.mode='n-env'", "pqn.hold_at_greedy=false"]
    overrides.append(f"pqn.follow_greedy={str(follow).lower()}")
    overrides.append(f"pqn.follow_margin={margin}")  # pqn.follow_greedy acts from 18 + margin
    run = Run(make_plan(load_preset("pong-fast", [*overrides, *AUTO_OFF])), tmp_path / "a")
    before, evaluated = _evaluation_done(run, score, average)
    try:
        run._record_evaluation()
        want = evaluated if adopted else before
        for key, value in run.learner.net.state_dict().items():
            assert torch.equal(value, want[key]), key
    finally:
        run.tracker.close()
        run.lock.release()


@pytest.mark.parametrize(
    ("hold", "follow", "average", "score", "margin"),
    [(True, True, False, 18.5, 0.0), (True, True, True, 17.9, 0.0), (False, True, True, 18.5, 0.0),
     (True, False, False, 18.5, 0.0), (True, True, True, 18.5, 1.0), (False, True, True, 18.5, 1.0),
     (True, True, True, 19.5, 1.0)],
)  # fmt: skip
def test_an_agent_evaluated_at_the_stop_reward_is_held_with_hold_at_greedy(
    tmp_path, hold, follow, average, score, margin
):
    # pqn.hold_at_greedy: from a greedy evaluation at run.stop_reward on, the learner and
    # the average are the evaluated weights (an evaluation of the weights as they are
    # too), no SGD update moves them and no evaluation starts; below it, or without
    # pqn.follow_greedy, learning goes on
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan
    from atari_speed.run.session import Run

    overrides = ["run.envs=1", "run.mode='n-env'", "eval.max_cpu_share=1.0"]
    overrides.append(f"pqn.hold_at_greedy={str(hold).lower()}")
    overrides.append(f"pqn.follow_greedy={str(follow).lower()}")
    overrides.append(f"pqn.follow_margin={margin}")  # pqn.follow_greedy acts from 18 + margin
    run = Run(make_plan(load_preset("pong-fast", [*overrides, *AUTO_OFF])), tmp_path / "a")
    learned: list[object] = []
    run.learner.learn = lambda *args: learned.append(args)
    before, evaluated = _evaluation_done(run, score, average)
    try:
        run._record_evaluation()
        acts = follow and score >= run.preset.run.stop_reward + margin
        held = hold and acts
        assert run.holds_greedy is held
        assert (run.learning_rate == 0.0) is held
        run.tracker.advance(run.preset.eval.every * 2)
        run.tracker.scores.best_smoothed = run.tracker.scores.smoothed = 10.0
        run.learn(None)
        run._evaluate()
        assert (run.evaluation is None) is held
        if run.evaluation is not None:
            run.evaluation.cancel()
            run.evaluation = None
        assert len(learned) == (0 if held else 1)
        adopted = acts and average
        want = evaluated if held or adopted else before
        for key, value in run.learner.net.state_dict().items():
            assert torch.equal(value, want[key]), key
        if held:
            for key, value in run.average.weights.items():
                assert torch.equal(value, evaluated[key]), key
    finally:
        run.tracker.close()
        run.lock.release()


@pytest.mark.parametrize(
    ("hold", "new_games", "score", "started"),
    [(True, True, 18.5, True), (True, False, 18.5, False), (True, True, 18.1, False),
     (False, True, 18.5, False)],
)  # fmt: skip
def test_the_envs_start_new_games_once_when_the_hold_begins(
    tmp_path, hold, new_games, score, started
):
    # pqn.new_games_at_hold: the evaluation that begins the hold (18 + pong-fast's margin)
    # sends every env to a new game, once; not below the margin, not without the hold,
    # not with the field off, and the final evaluation never does
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan
    from atari_speed.run.session import Run

    overrides = ["run.envs=1", "run.mode='n-env'", f"pqn.hold_at_greedy={str(hold).lower()}"]
    overrides.append(f"pqn.new_games_at_hold={str(new_games).lower()}")
    run = Run(make_plan(load_preset("pong-fast", [*overrides, *AUTO_OFF])), tmp_path / "a")
    calls: list[None] = []
    run.actor = SimpleNamespace(new_games=lambda: calls.append(None))
    try:
        _evaluation_done(run, score, average=True)
        run._record_evaluation()
        assert len(calls) == int(started)
        _evaluation_done(run, 19.0, average=True)
        run._record_evaluation(final=True)
        assert len(calls) == int(started)
    finally:
        run.tracker.close()
        run.lock.release()


def test_with_learn_while_held_the_actor_holds_the_best_agent_and_learning_goes_on(tmp_path):
    # pqn.learn_while_held: a greedy evaluation at 18 + pong-fast's margin hands the
    # training games to the agent it played, and the learner goes on at the rates for 18:
    # SGD, evaluations; a lower evaluation later leaves the held agent (and the schedules)
    # as they are, a higher one takes its place; a resumed run holds the same agent
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan
    from atari_speed.run.session import Run

    overrides = ["run.envs=1", "run.mode='n-env'", "eval.max_cpu_share=1.0"]
    plan = make_plan(load_preset("pong-fast", [*overrides, "pqn.learn_while_held=true", *AUTO_OFF]))
    phases = SimpleNamespace(tolist=lambda: [0])  # the actor's envs' steps into their games
    run = Run(plan, tmp_path / "a")
    acted: list[object] = []
    run.actor = SimpleNamespace(act_with=acted.append, phases=phases)
    learned: list[object] = []
    run.learner.learn = lambda *args: learned.append(args)
    stop = run.preset.run.stop_reward
    try:
        run.tracker.scores.best_smoothed = run.tracker.scores.smoothed = -10.0
        _, first = _evaluation_done(run, 18.5, average=True)
        run._record_evaluation()
        assert not run.holds_greedy and run.held_score == 18.5
        assert acted[-1] is run.held_net
        for key, value in run.held_net.state_dict().items():
            assert torch.equal(value, first[key]), key
        assert run.schedule_score() == stop  # the rates and epsilon for a solved agent
        assert 0.0 < run.learning_rate < run.preset.dqn.learning_rate * 0.2
        run.learn(None)
        assert len(learned) == 1 and acted[-1] is run.held_net
        run.tracker.advance(run.preset.eval.every * 2)
        run._evaluate()
        assert run.evaluation is not None  # evaluations go on
        run.evaluation.cancel()
        # lower, and below the margin: the agent held and the schedules stay
        _evaluation_done(run, 12.0, average=True)
        run._record_evaluation()
        assert run.held_score == 18.5 and run.schedule_score() == stop
        for key, value in run.held_net.state_dict().items():
            assert torch.equal(value, first[key]), key
        # higher: it plays the training games from now on
        _, better = _evaluation_done(run, 19.5, average=True)
        run._record_evaluation()
        assert run.held_score == 19.5 and acted[-1] is run.held_net
        for key, value in run.held_net.state_dict().items():
            assert torch.equal(value, better[key]), key
        run.checkpoint()
    finally:
        run.tracker.close()
        run.lock.release()
    resumed = Run(plan, tmp_path / "b", resume=str(tmp_path / "a" / "checkpoint.pt"))
    try:
        assert resumed.held_score == 19.5 and resumed.schedule_score() == stop
        for key, value in resumed.held_net.state_dict().items():
            assert torch.equal(value, better[key]), key
        resumed_acted: list[object] = []
        resumed.choose_acting(SimpleNamespace(act_with=resumed_acted.append))
        assert resumed_acted == [resumed.held_net]
    finally:
        resumed.tracker.close()
        resumed.lock.release()


@pytest.mark.parametrize("act_bf16", [False, True])
def test_a_runs_learner_computes_values_in_the_precision_its_actor_chooses_in(tmp_path, act_bf16):
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan
    from atari_speed.run.session import Run

    overrides = ["run.envs=1", "run.mode='n-env'", "env.backend='sync'", "run.precision='bf16'"]
    overrides.append(f"run.act_bf16={str(act_bf16).lower()}")
    run = Run(make_plan(load_preset("pong-fast", overrides)), tmp_path / "a")
    try:
        assert run.learner.act_bf16 is run.plan.act_bf16 is act_bf16
    finally:
        run.tracker.close()
        run.lock.release()


def test_a_resumed_run_brings_its_envs_back_with_the_network_it_acted_with(tmp_path):
    # the envs of a run that stopped while acting with the average are spread (or brought
    # back to their phases) by the average, as they were played
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan
    from atari_speed.run.session import Run

    overrides = ["run.envs=1", "eval.average_steps=100", "pqn.act_with_average=true"]
    overrides += ["pqn.act_average_from=5.0", "run.resume_spread=4", "run.mode='n-env'"]
    run = Run(make_plan(load_preset("pong-fast", [*overrides, *AUTO_OFF])), tmp_path / "a")
    happened: list[object] = []
    actor = SimpleNamespace(
        act_with=happened.append, spread=lambda most, epsilon: happened.append("spread")
    )
    try:
        run.resumed_from, run.tracker.scores.smoothed = "checkpoint.pt", 12.0
        run.start_actor(actor)
        assert happened == [run.average.net, "spread"]
    finally:
        run.tracker.close()
        run.lock.release()


def test_acting_with_the_average_needs_one_and_the_n_env_actor():
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan

    with pytest.raises(ConfigError, match="act_with_average = true with \\[dqn\\] algorithm"):
        load_preset("pong-fast-dqn", ["pqn.act_with_average=true", "eval.average_steps=100"])

    with pytest.raises(ConfigError, match="average_steps = 0"):
        load_preset("pong-fast", ["pqn.act_with_average=true", "eval.average_steps=0"])
    with pytest.raises(ConfigError, match=r"\[eval\] average_from = 15 with average_steps"):
        load_preset("pong-nenv", ["eval.average_from=15.0", "eval.average_steps=0"])
    # parallel mode's actors see neither the score nor the average: every field that
    # follows them is named in one line, with the --set that turns each off
    parallel = ["run.mode='parallel'", "run.actors=1", "explore.epsilon_at_stop=-1"]
    parallel += ["explore.env_spread=1"]
    with pytest.raises(ConfigError, match=r"with pqn.act_with_average = true: .* or --set pqn"):
        load_preset("pong-fast", [*parallel, "pqn.act_with_average=true"])
    # nor when the learner begins to hold the greedy agent
    with pytest.raises(ConfigError, match=r"with pqn.new_games_at_hold = true: .* or --set pqn"):
        load_preset(
            "pong-fast", [*parallel, "pqn.act_with_average=false", "pqn.new_games_at_hold=true"]
        )
    with pytest.raises(ConfigError, match=r"with pqn.learn_while_held = true: .* or --set pqn"):
        load_preset(
            "pong-fast", [*parallel, "pqn.act_with_average=false", "pqn.learn_while_held=true"]
        )
    both = ["run.mode='parallel'", "run.actors=1", "pqn.act_with_average=true"]
    both += ["explore.epsilon_at_stop=0.0"]
    with pytest.raises(ConfigError, match=r"epsilon_at_stop = 0 and pqn\.act_with_average") as e:
        load_preset("pong-fast", both)
    off = str(e.value).split("or --set ")[1].split(" --set ")
    assert off == [
        "explore.epsilon_at_stop=-1",
        "pqn.act_with_average=false",
        "explore.env_spread=1",
    ]
    make_plan(load_preset("pong-fast", [*both, *off, *AUTO_OFF]))  # as the line says: runs


def test_best_pt_by_smoothed_score_is_kept_and_written_with_the_next_checkpoint(tmp_path):
    # without evaluations best.pt follows the smoothed score: a new best keeps the weights
    # of that moment (not written yet), the checkpoint.pt that comes next writes them with
    # their agent step, and an evaluation, from which on best.pt follows evaluations,
    # drops them
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan
    from atari_speed.run.session import Run

    overrides = ["run.envs=1", "run.mode='n-env'", "run.checkpoint_every=100", *AUTO_OFF]
    run = Run(make_plan(load_preset("pong-fast", overrides)), tmp_path / "a")
    best_pt = tmp_path / "a" / "best.pt"
    try:
        run.tracker.advance(40)
        run.game(Game(-20.0, 40))
        at_best = {k: v.clone() for k, v in run.learner.net.state_dict().items()}
        with torch.no_grad():  # training moves the weights on, and the next game is worse
            for p in run.learner.net.parameters():
                p.add_(1.0)
        run.tracker.advance(30)
        run.game(Game(-21.0, 30))
        assert not best_pt.exists(), "a new best is kept, not written at once"
        run.periodic(0.0)  # agent step 70: before the first checkpoint.pt
        assert not best_pt.exists()
        run.tracker.advance(40)
        run.periodic(0.0)  # 110: checkpoint.pt, and best.pt with it
        best = load_checkpoint(best_pt)
        assert best.frames == 40 and best.learner is None
        assert all(torch.equal(best.net[k], v) for k, v in at_best.items())
        assert run.best_pending is None, "written once"
        best_pt.unlink()
        run.game(Game(-19.0, 40))  # a new best again; then an evaluation is recorded
        assert run.best_pending is not None
        _evaluation_done(run, -18.0, average=False)
        run._record_evaluation()
        assert run.best_pending is None
        assert load_checkpoint(best_pt).frames == run.frames, "the evaluation's best.pt"
    finally:
        run.tracker.close()
        run.lock.release()


def test_a_run_that_ends_writes_the_best_weights_it_kept(tmp_path):
    # the way out (finish) writes the kept best, as a run that ends before its first
    # checkpoint.pt interval must still leave its best.pt
    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import make_plan
    from atari_speed.run.session import Run
    from atari_speed.run.training import finish

    overrides = ["run.envs=1", "run.mode='n-env'", *AUTO_OFF]
    run = Run(make_plan(load_preset("pong-fast", overrides)), tmp_path / "a")
    run.tracker.advance(25)
    run.game(Game(-20.0, 25))
    finish(run, failing=False)
    assert load_checkpoint(tmp_path / "a" / "best.pt").frames == 25


@pytest.mark.parametrize("keep", [True, False])
def test_train_keeps_freed_memory_where_the_preset_says(tmp_path, monkeypatch, keep):
    # run.keep_freed_memory sets the C library's malloc before anything of the run is made
    from atari_speed.core.config import load_preset
    from atari_speed.run import training

    class Stop(Exception):
        pass

    def no_run(*args, **kwargs):
        raise Stop

    calls: list[bool] = []
    monkeypatch.setattr(training, "keep_freed_memory", lambda: calls.append(True) or True)
    monkeypatch.setattr(training, "make_plan", no_run)
    preset = load_preset("pong-fast", [f"run.keep_freed_memory={str(keep).lower()}", *AUTO_OFF])
    with pytest.raises(Stop):
        training.train(preset, tmp_path / "a")
    assert calls == ([True] if keep else [])
