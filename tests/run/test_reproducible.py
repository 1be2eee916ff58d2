"""Same seed, same run: on a CPU, n-env mode learns the same weights twice over, on the
ale and subprocess backends, for DQN and PQN, in fp32 and bf16 (docs/reliability.md says
which modes are not reproducible, and why)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.scripts import run_script, train_here

RUNS = {
    "DQN, ale backend": [
        "--preset", "pong-nenv", "--envs", "4", "--frames", "250", "--set", "env.backend='ale'",
        "--set", "env.pipeline='maxpool84'",  # ALE cannot play the book's FireReset
        "--set", "replay.initial=200", "--set", "replay.size=2000",
    ],
    "DQN, subprocess backend": [
        "--preset", "pong-nenv", "--envs", "4", "--frames", "250", "--set",
        "env.backend='subprocess'", "--set", "replay.initial=200", "--set", "replay.size=2000",
    ],
    "PQN, ale backend, fp32": [
        "--preset", "pong-pqn", "--envs", "4", "--frames", "512", "--set", "pqn.rollout=16",
        "--set", "pqn.minibatches=2", "--set", "run.precision='fp32'",
    ],
    "PQN, ale backend, bf16": [
        "--preset", "pong-pqn", "--envs", "4", "--frames", "512", "--set", "pqn.rollout=16",
        "--set", "pqn.minibatches=2", "--set", "run.precision='bf16'",
    ],
}  # fmt: skip


def weights(args: list[str], run_dir: Path, seed: int, threads: int = 0) -> dict[str, torch.Tensor]:
    """The weights a run learned: train.py in a process of its own, or, given the torch
    threads a fresh one had (they decide how a sum is split, hence its last bits), its main
    in this process (one interpreter's start, ~8 s here, saved per run)."""
    # on the CPU also where a GPU is: CUDA's kernels need not sum in one order
    run = ["--device", "cpu", *args, "--seed", str(seed), "--run-dir", str(run_dir)]
    if threads:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            out = train_here(*run)
        finally:
            torch.set_num_threads(before)
    else:
        out = run_script("train.py", *run)
    assert out.returncode == 0, out.stderr
    checkpoint = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert checkpoint["learner"]["updates"] > 0, "the runs must have learned something"
    return checkpoint["net"]


def fresh_threads(run_dir: Path) -> int:
    return json.loads((run_dir / "summary.json").read_text())["torch_threads"]


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("name", list(RUNS))
def test_the_same_seed_learns_the_same_weights(tmp_path, name):
    # One run in a process of its own (forked from the preloaded server, tests.launcher), one
    # in this process: the second shares nothing with the first (hash seeds, import order,
    # whatever earlier tests left in this process).
    first = weights(RUNS[name], tmp_path / "a", seed=3)
    threads = fresh_threads(tmp_path / "a")
    assert same(first, weights(RUNS[name], tmp_path / "b", seed=3, threads=threads))
    if name == "PQN, ale backend, fp32":  # and the comparison can tell runs apart
        assert not same(first, weights(RUNS[name], tmp_path / "c", seed=4, threads=threads))
