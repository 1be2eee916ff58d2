"""Parallel mode on Ray. The batches and the refusals need no Ray; the runs are marked
``ray`` (``uv run --extra ray pytest -m ray``, which CI runs after the default suite):
a local Ray with 2 CPUs, 2 Ray actors, end to end, with an actor killed, and Ctrl-C; a
two-node cluster of real ``ray start`` nodes on this machine, joined with --ray-address,
with a node lost mid-run; and each way joining a cluster can fail, in one line.

Each test looks only at the processes of its own Ray: a Ray started by train.py lives in
train.py's process group (Ray makes its driver a group leader), a ``ray start --block``
node in the group of the process that ran it; another Ray on the machine is not ours."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from atari_speed.agent.actor import Actor
from atari_speed.agent.networks import build_network
from atari_speed.agent.replay import ARRAYS, FrameReplay
from atari_speed.core.config import load_preset
from atari_speed.core.errors import ConfigError
from atari_speed.core.timing import Profiler
from atari_speed.envs.vector import make_vector_env
from atari_speed.run.checkpoint import load_checkpoint
from atari_speed.run.ray_engine import StepRecorder, write_batch
from tests.run.test_pqn import TINY as PQN_TINY
from tests.run.test_training import TINY
from tests.scripts import run_patched, start_script

RAY_RUN = ["--preset", "pong-parallel", "--engine", "ray", "--set", "run.actors=2"]
RAY_RUN += ["--set", "run.envs=2", "--set", "dqn.train_every=4", *TINY]
PQN_RAY_RUN = [*PQN_TINY, "--engine", "ray", "--set", "run.actors=2", "--set", "run.envs=2"]


def test_a_batch_written_by_the_learner_equals_what_the_actor_writes_itself():
    # Same envs, seed and network: stepping into the replay, or into a recorder whose
    # batches the learner writes into its columns, must fill the same replay.
    preset = load_preset("pong-parallel")
    net = build_network(preset.dqn, (4, 84, 84), 6)

    def fill(sink_for_replay: bool) -> FrameReplay:
        venv = make_vector_env("book", "pong", 2, backend="sync")
        venv.reset(seed=5)
        replay = FrameReplay(600, 4, (1, 84, 84), 4, n_steps=3)
        recorder = StepRecorder(25, 2, (1, 84, 84))
        sink = replay if sink_for_replay else recorder
        cols = slice(2, 4)
        actor = Actor(
            venv, net, sink, cols, 5, np.random.default_rng(5), torch.device("cpu"), Profiler(False)
        )
        for _ in range(4):  # 100 steps: past games' ends (epsilon 1: random play)
            for _ in range(25):
                actor.step(1.0)
            if not sink_for_replay:
                assert write_batch(recorder.send(), replay, cols) == 50
        venv.close()
        return replay

    direct, batched = fill(True), fill(False)
    for name in ARRAYS:
        assert np.array_equal(getattr(direct, name), getattr(batched, name)), name
    assert direct.written[2:].min() == 100 and direct.written[:2].max() == 0


def test_the_ray_engine_without_ray_installed_is_one_line_naming_the_command(tmp_path):
    patch = "sys.modules['ray'] = None  # as if the extra were not installed"
    out = run_patched(patch, [*RAY_RUN, "--frames", "300", "--run-dir", str(tmp_path / "r")])
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "train.py: error: run.engine = 'ray' needs Ray, an optional extra: run `uv run "
        "--extra ray train.py ...` (or `uv sync --extra ray` once)"
    ]
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["run.engine='ray'", "run.mode='n-env'"], "engine = 'ray' with mode = 'n-env'"),
    ],
)
def test_what_the_ray_engine_does_not_run_is_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_preset("pong-parallel", overrides)


# ---------------------------------------------------------------- with Ray


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def ray_processes(group: int) -> list[str]:
    """The live processes of process group ``group`` (zombies are already dead)."""
    out = subprocess.run(["ps", "-eo", "pgid=,stat=,args="], capture_output=True, text=True)
    rows = [line.split(None, 2) for line in out.stdout.splitlines()]
    return [r[2] for r in rows if len(r) == 3 and int(r[0]) == group and not r[1].startswith("Z")]


def until(condition, seconds: float = 60) -> bool:
    """Whether ``condition()`` came true within ``seconds`` (polled)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def train(*args: str, env: dict[str, str] | None = None, timeout: float = 400):
    """train.py run to its end in a process group of its own (so that its Ray's processes
    can be told from any other's); the process, its stdout and its stderr."""
    proc = start_script("train.py", *args, env=env, fresh=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc, out, err


def wait_for_frames(proc: subprocess.Popen, run_dir: Path, frames: int) -> dict:
    """The run's summary once it has ``frames`` frames (Ray's start on a loaded machine
    can take minutes: the deadline is generous, the poll is what waits)."""
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
        with_summary = (run_dir / "summary.json").is_file()
        if with_summary and summary(run_dir)["steps"] >= frames:
            return summary(run_dir)
    raise AssertionError(f"no training progress; stderr: {proc.communicate()[1][-2000:]}")


@pytest.mark.ray
def test_two_ray_actors_end_to_end(tmp_path):
    proc, _, err = train(*RAY_RUN, "--frames", "600", "--run-dir", str(tmp_path))
    assert proc.returncode == 0, err
    s = summary(tmp_path)
    assert s["mode"] == "parallel" and s["envs"] == 4 and s["choices"]["engine"] == "ray"
    data = load_checkpoint(tmp_path / "checkpoint.pt")
    assert data.frames == s["steps"] >= 600
    # The update-to-data ratio holds exactly: one update per 4 frames after the warm-up.
    assert data.learner["updates"] == (data.frames - 200) // 4
    assert (tmp_path / "replay.npz").is_file()
    assert all(gone(pid) for pid in s["choices"]["actor_pids"])
    assert until(lambda: ray_processes(proc.pid) == []), "the local Ray was stopped"


@pytest.mark.ray
def test_pqn_on_two_ray_actors_trains_on_whole_rollouts(tmp_path):
    """Each Ray actor sends its 2 envs' columns of a 16-step rollout; the learner trains
    epochs x minibatches on each whole rollout, at most one rollout behind the actors."""
    proc, _, err = train(*PQN_RAY_RUN, "--frames", "640", "--run-dir", str(tmp_path))
    assert proc.returncode == 0, err
    s = summary(tmp_path)
    assert s["mode"] == "parallel" and s["envs"] == 4 and s["choices"]["engine"] == "ray"
    data = load_checkpoint(tmp_path / "checkpoint.pt")
    rollout = 4 * 16
    assert data.frames == s["steps"] >= 640
    updates = data.learner["updates"]
    assert updates % 4 == 0  # 2 epochs x 2 minibatches a rollout, only whole rollouts
    # Actors play at most one rollout past the one the learner trains on: every frame
    # counted but the last two rollouts' was trained on.
    assert data.frames <= (updates // 4 + 2) * rollout
    assert not (tmp_path / "replay.npz").exists()  # PQN keeps no replay
    assert until(lambda: ray_processes(proc.pid) == [])


@pytest.mark.ray
def test_a_resumed_ray_run_has_its_actors_spread_their_envs_first(tmp_path):
    spread = ["--set", "run.resume_spread=64"]
    proc, _, err = train(*PQN_RAY_RUN, *spread, "--frames", "640", "--run-dir", str(tmp_path))
    assert proc.returncode == 0, err
    checkpoint = tmp_path / "checkpoint.pt"
    proc, out, err = train("--resume", str(checkpoint), "--frames", "1280")
    assert proc.returncode == 0, err
    assert "run.resume_spread" in out  # each actor's first batch began with the spread
    assert load_checkpoint(checkpoint).frames >= 1280
    assert until(lambda: ray_processes(proc.pid) == [])


@pytest.mark.ray
@pytest.mark.parametrize("args", [RAY_RUN, PQN_RAY_RUN], ids=["dqn", "pqn"])
def test_a_killed_ray_actor_is_restarted_and_the_run_completes(tmp_path, args):
    proc = start_script(
        "train.py", *args, "--frames", "2000", "--run-dir", str(tmp_path), fresh=True
    )
    try:
        pids = wait_for_frames(proc, tmp_path, 400)["choices"]["actor_pids"]
        os.kill(pids[1], signal.SIGKILL)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert "ray actor 1 died" in out and "restarted it (1 of 3)" in out
    s = summary(tmp_path)
    assert s["steps"] >= 2000 and s["choices"]["actor_restarts"] == 1
    if args is PQN_RAY_RUN:  # the learner kept training after the restart, not stalled
        updates = load_checkpoint(tmp_path / "checkpoint.pt").learner["updates"]
        assert updates // 4 >= s["steps"] // (4 * 16) - 2
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path)).Reload()
    assert [e.value for e in events.Scalars("ray/actor_restarts")] == [1.0]
    assert until(lambda: ray_processes(proc.pid) == [])


@pytest.mark.ray
def test_ctrl_c_stops_the_ray_actors_and_the_local_ray(tmp_path):
    proc = start_script(
        "train.py", *RAY_RUN, "--frames", "10000000", "--run-dir", str(tmp_path), fresh=True
    )
    try:
        pids = wait_for_frames(proc, tmp_path, 300)["choices"]["actor_pids"]
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "checkpoint.pt saved" in err
    assert until(lambda: all(gone(pid) for pid in pids) and ray_processes(proc.pid) == [])


# ---------------------------------------------------------------- a two-node cluster


def free_ports(count: int) -> list[int]:
    """``count`` ports nothing on 127.0.0.1 listens on now (held open together, so they
    differ)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


class Cluster:
    """Ray nodes on this machine, each a ``ray start --block`` in a process group of its
    own: the processes this test started, and the only ones it stops. Every port a node
    opens is a free one, since two nodes on one machine would clash on Ray's defaults."""

    def __init__(self, **config: str) -> None:
        self.token = secrets.token_hex(16)
        # Token authentication as docs/scale.md sets it up on every node; ``config``: Ray
        # system settings for every node, as RAY_<name> variables.
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token}
        self.env |= {f"RAY_{name}": value for name, value in config.items()}
        self.nodes: list[subprocess.Popen] = []
        self.address = ""
        # Its own temp dir: `ray start` records its address in the default one, and a
        # plain ray.init() elsewhere on the machine would join this cluster.
        self.temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: socket paths

    def start(self, cpus: int, head: bool = False) -> None:
        ports = free_ports(8)
        ray = str(Path(sys.executable).parent / "ray")
        where = ["--head", "--port", str(ports[0])] if head else ["--address", self.address]
        args = [
            ray, "start", *where, "--block", "--num-cpus", str(cpus),
            "--node-ip-address", "127.0.0.1", "--disable-usage-stats", "--temp-dir", self.temp,
            "--node-manager-port", str(ports[1]), "--object-manager-port", str(ports[2]),
            "--dashboard-agent-listen-port", str(ports[3]),
            "--dashboard-agent-grpc-port", str(ports[4]),
            "--metrics-export-port", str(ports[5]), "--runtime-env-agent-port", str(ports[6]),
        ]  # fmt: skip
        if head:
            args += ["--include-dashboard", "false", "--ray-client-server-port", str(ports[7])]
            self.address = f"127.0.0.1:{ports[0]}"
        log = Path(self.temp) / f"node-{len(self.nodes)}.log"
        with log.open("w") as out:
            node = subprocess.Popen(
                args, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.nodes.append(node)
        # Up once it says so: its raylet has registered with the head by then.
        assert until(lambda: "Ray runtime started" in log.read_text() or node.poll(), 300)
        assert node.poll() is None, f"ray start {' '.join(where)} failed:\n{log.read_text()}"

    def raylet(self, node: subprocess.Popen) -> int | None:
        """The pid of ``node``'s raylet, once it runs."""
        out = subprocess.run(["ps", "-eo", "pgid=,pid=,comm="], capture_output=True, text=True)
        for pgid, pid, name in (line.split(None, 2) for line in out.stdout.splitlines()):
            if int(pgid) == node.pid and name == "raylet":
                return int(pid)
        return None

    def node_id(self, node: subprocess.Popen) -> str:
        """``node``'s Ray node id, from its raylet's command line."""
        args = Path(f"/proc/{self.raylet(node)}/cmdline").read_bytes().split(b"\0")
        return next(a.decode().split("=", 1)[1] for a in args if a.startswith(b"--node_id="))

    def stop(self) -> None:
        for node in reversed(self.nodes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGKILL)
            node.wait(timeout=60)
        assert until(lambda: all(ray_processes(n.pid) == [] for n in self.nodes))
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    """A head and a worker node with one CPU each, token authentication on."""
    cluster = Cluster()
    try:
        cluster.start(cpus=1, head=True)
        cluster.start(cpus=1)
        yield cluster
    finally:
        cluster.stop()


def client_env(cluster: Cluster, **changes: str | None) -> dict[str, str]:
    """train.py's environment: the cluster's token in RAY_AUTH_TOKEN, and RAY_AUTH_MODE
    unset (train.py turns token authentication on when it has a token), then
    ``changes`` (None removes a variable)."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    env["RAY_AUTH_TOKEN"] = cluster.token
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


@pytest.mark.ray
def test_a_run_trains_with_one_actor_on_each_node_of_a_two_node_cluster(cluster, tmp_path):
    args = [*RAY_RUN, "--ray-address", cluster.address, "--frames", "600"]
    proc, _, err = train(*args, "--run-dir", str(tmp_path), env=client_env(cluster))
    assert proc.returncode == 0, err
    s = summary(tmp_path)
    assert s["choices"]["engine"] == "ray" and s["choices"]["actors"] == 2
    # One actor on each node: the nodes' own ids, read off their raylets.
    assert sorted(s["choices"]["actor_nodes"]) == sorted(map(cluster.node_id, cluster.nodes))
    data = load_checkpoint(tmp_path / "checkpoint.pt")
    per_actor = s["choices"]["actor_frames"]
    # Every frame counted once: each actor's are whole batches (16 steps x 2 envs), and
    # theirs add up to the run's; one update per 4 frames after the 200 of warm-up.
    assert data.frames == s["steps"] == sum(per_actor) >= 600
    assert all(n > 0 and n % 32 == 0 for n in per_actor), per_actor
    assert data.learner["updates"] == (data.frames - 200) // 4
    assert ray_processes(proc.pid) == []  # nothing of its own left running
    for node in cluster.nodes:  # and left the cluster running
        assert node.poll() is None and cluster.raylet(node) is not None


@pytest.mark.ray
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"RAY_AUTH_TOKEN": "0" * 32},
            "the cluster refused the authentication token from RAY_AUTH_TOKEN; use the head "
            "node's (`ray get-auth-token` prints it there) in RAY_AUTH_TOKEN or "
            "~/.ray/auth_token",
        ),
        (
            {"RAY_AUTH_TOKEN": None, "RAY_AUTH_TOKEN_PATH": None, "HOME": "<empty>"},
            "the cluster needs an authentication token and this process has none; copy the "
            "head node's ~/.ray/auth_token (`ray get-auth-token` prints it there) to "
            "~/.ray/auth_token here, or set RAY_AUTH_TOKEN to it",
        ),
    ],
    ids=["wrong-token", "no-token"],
)
def test_a_cluster_refusing_the_token_is_one_line_before_the_run(
    cluster, tmp_path, changes, message
):
    if changes.get("HOME") == "<empty>":  # a machine with no ~/.ray/auth_token
        changes = {**changes, "HOME": str(tmp_path / "home")}
        (tmp_path / "home").mkdir()
    run_dir = tmp_path / "r"
    args = [*RAY_RUN, "--ray-address", cluster.address, "--run-dir", str(run_dir)]
    proc, _, err = train(*args, env=client_env(cluster, **changes))
    assert proc.returncode == 2
    assert err.strip().splitlines() == [
        f"train.py: error: run.ray_address = {cluster.address!r}: {message}"
    ]
    assert not run_dir.exists()


@pytest.mark.ray
def test_a_cluster_on_another_ray_version_is_one_line_before_the_run(cluster, tmp_path):
    import ray

    patch = (
        f"import os; os.environ['RAY_AUTH_TOKEN'] = {cluster.token!r}\n"
        "import ray; ray.__version__ = '2.59.0'  # as if this environment had another Ray"
    )
    run_dir = tmp_path / "r"
    args = [*RAY_RUN, "--ray-address", cluster.address, "--run-dir", str(run_dir)]
    out = run_patched(patch, args, fresh=True)  # a Ray client: a new interpreter, as before
    python = ".".join(map(str, sys.version_info[:3]))
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"train.py: error: run.ray_address = {cluster.address!r}: the cluster runs Ray "
        f"{ray.__version__} on Python {python}, this process Ray 2.59.0 on Python {python}; "
        "start every node and train.py from this repository's uv.lock (`uv sync --extra "
        "ray`) with the same Python"
    ]
    assert not run_dir.exists()


@pytest.mark.ray
def test_more_actors_than_the_cluster_has_cpus_is_one_line_before_the_run(cluster, tmp_path):
    run_dir = tmp_path / "r"
    args = [*RAY_RUN, "--set", "run.actors=3", "--ray-address", cluster.address]
    proc, _, err = train(*args, "--run-dir", str(run_dir), env=client_env(cluster))
    assert proc.returncode == 2
    assert err.strip().splitlines() == [
        f"train.py: error: run.ray_address = {cluster.address!r}: the cluster has 2 CPU(s) "
        "for run.actors = 3, one each; add nodes (`ray start --address ...`) or run fewer "
        "actors"
    ]
    assert not run_dir.exists()


@pytest.mark.ray
def test_an_address_with_nothing_listening_is_one_line_before_the_run(tmp_path):
    address = f"127.0.0.1:{free_ports(1)[0]}"
    run_dir = tmp_path / "r"
    proc, _, err = train(*RAY_RUN, "--ray-address", address, "--run-dir", str(run_dir))
    port = address.split(":")[1]
    assert proc.returncode == 2
    assert err.strip().splitlines() == [
        f"train.py: error: run.ray_address = {address!r}: nothing is listening there "
        f"(Connection refused); start the head node with `uv run --extra ray ray start "
        f"--head --port {port}` (docs/scale.md) or give the address it printed"
    ]
    assert not run_dir.exists()


@pytest.mark.ray
@pytest.mark.parametrize("head_cpus", [2, 1], ids=["restarted-on-the-head", "no-room-left"])
def test_a_node_lost_mid_run_restarts_its_actor_elsewhere_or_ends_in_one_line(tmp_path, head_cpus):
    """The worker node is killed: its actor moves to the head when the head has a
    free CPU; when it has none, the run ends in one line with its checkpoint."""
    # Ray learns that a node is gone from missed health checks (by default about 15 s of
    # them), and the head's actor alone can finish the run before that: in CI it did, and
    # no death was seen. Checked every 0.5 s, three missed in a row, it knows in ~2 s.
    lost = Cluster(
        health_check_initial_delay_ms="1000",
        health_check_period_ms="500",
        health_check_timeout_ms="1000",
        health_check_failure_threshold="3",
    )
    try:
        lost.start(cpus=head_cpus, head=True)
        lost.start(cpus=1)
        head, worker = map(lost.node_id, lost.nodes)
        args = [*RAY_RUN, "--ray-address", lost.address, "--frames", "1200"]
        proc = start_script(
            "train.py", *args, "--run-dir", str(tmp_path), env=client_env(lost), fresh=True
        )
        try:
            nodes = wait_for_frames(proc, tmp_path, 400)["choices"]["actor_nodes"]
            assert sorted(nodes) == sorted([head, worker])
            moved = nodes.index(worker)
            # The whole node goes, as with a lost machine: its raylet and its workers (a
            # worker outliving its raylet still answers calls for a while, so killing the
            # raylet alone left the run to finish on it before Ray noticed, in CI).
            os.killpg(lost.nodes[1].pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=400)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    finally:
        lost.stop()
    s = summary(tmp_path)
    if head_cpus == 2:
        assert proc.returncode == 0, err
        assert f"ray actor {moved} died" in out
        assert f"restarted it (1 of 3) on node {head[:12]}" in out
        assert s["choices"]["actor_nodes"] == [head, head] and s["steps"] >= 1200
        assert s["choices"]["actor_restarts"] == 1
    else:
        # The progress lines and Ray's own log lines come before it; no traceback.
        assert proc.returncode == 1 and "Traceback" not in err, err
        assert err.strip().splitlines()[-1] == (
            f"train.py: error: ray actor {moved} died (its node {worker[:12]} was lost) and "
            "the nodes left have 1 CPU(s) for 2 actors, none free to restart it on; add a "
            "node (`ray start --address ...`, docs/scale.md) or run fewer actors (run.actors)"
        )
    data = load_checkpoint(tmp_path / "checkpoint.pt")  # saved either way, with the replay
    assert data.frames == s["steps"] == sum(s["choices"]["actor_frames"]) > 400
    assert data.learner["updates"] == (data.frames - 200) // 4
    assert (tmp_path / "replay.npz").is_file()


@pytest.mark.ray
def test_concurrent_runs_go_to_the_cluster_as_tasks(cluster, tmp_path):
    """--concurrent --ray-address: each seed a Ray task with one CPU of a node, trained
    there with local actors; the table comes back to this process."""
    tiny_pqn = ["--preset", "pong-pqn", "--envs", "2", "--frames", "64"]
    tiny_pqn += ["--set", "pqn.rollout=8", "--set", "pqn.minibatches=2"]
    args = [*tiny_pqn, "--seeds", "0,1", "--concurrent", "--ray-address", cluster.address]
    proc, out, err = train(*args, "--run-dir", str(tmp_path), env=client_env(cluster))
    assert proc.returncode == 0, err
    assert out.count(f"(1 CPU(s) on the cluster at {cluster.address})") == 2
    table = json.loads((tmp_path / "ablation.json").read_text())
    assert [r["variant"] for r in table["rows"]] == ["seed 0", "seed 1"]
    for r in table["rows"]:
        s = json.loads((Path(r["run_dir"]) / "summary.json").read_text())
        assert s["steps"] == 64 and s["torch_threads"] == 1
    assert ray_processes(proc.pid) == []  # nothing of its own left running
    for node in cluster.nodes:
        assert node.poll() is None
