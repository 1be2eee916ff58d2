"""On a real CUDA device: PQN's updates are the CPU's math, bf16 runs there, and a short
pong-fast run trains, checkpoints and plays back on the CPU. The other tests fake the device
(tests/agent/test_learner.py, test_pqn.py); these need one, so they are skipped where torch
sees none (CI's machines have none). docs/testing.md says where they last ran."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from atari_speed.agent.pqn import QLambdaLearner
from atari_speed.run.checkpoint import load_checkpoint
from tests.agent.test_pqn import filled_rollout
from tests.agent.test_pqn import learner as pqn_learner
from tests.scripts import play_here, train_here

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")


def learner(device: str, bf16: bool = False, **pqn: int) -> QLambdaLearner:
    """test_pqn's learner, channels-last, on ``device``."""
    return pqn_learner(bf16, channels_last=True, device=device, **{"minibatches": 4, **pqn})


def moved_and_apart(a: QLambdaLearner, b: QLambdaLearner) -> tuple[float, float]:
    """How far ``a``'s updates moved its weights, and how far ``b``'s are from ``a``'s."""
    start = learner("cpu").net.parameters()
    pairs = zip(a.net.parameters(), b.net.parameters(), start, strict=True)
    moved, apart = 0.0, 0.0
    for p, q, p0 in pairs:
        p, q = p.detach().cpu().float(), q.detach().cpu().float()
        moved = max(moved, (p - p0).abs().max().item())
        apart = max(apart, (p - q).abs().max().item())
    return moved, apart


def test_a_pqn_update_on_cuda_is_the_cpus_math(monkeypatch):
    # cuDNN may run convolutions in TF32 (10-bit mantissas): off, to compare the math
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    rollout = filled_rollout()
    cpu, cuda = learner("cpu", epochs=1, minibatches=1), learner("cuda", epochs=1, minibatches=1)
    for pqn in (cpu, cuda):
        pqn.learn(rollout, 0.0, np.random.default_rng(0))
    assert cpu.updates == cuda.updates == 1
    assert next(cuda.net.parameters()).device.type == "cuda"
    assert cuda.targets(rollout) == pytest.approx(cpu.targets(rollout), abs=1e-4)
    moved, apart = moved_and_apart(cpu, cuda)
    assert moved > 1e-4 and apart < 1e-3 * moved, (moved, apart)
    assert cuda.pop_loss() == pytest.approx(cpu.pop_loss(), rel=1e-4)


def test_bf16_on_cuda_trains_with_finite_losses_near_fp32s():
    rollout = filled_rollout()
    fp32, bf16 = learner("cuda"), learner("cuda", bf16=True)
    for pqn in (fp32, bf16):
        pqn.learn(rollout, 0.0, np.random.default_rng(0))
    loss = bf16.pop_loss()
    assert loss is not None and np.isfinite(loss)
    moved, apart = moved_and_apart(fp32, bf16)
    assert moved > 1e-4 and apart < 0.5 * moved, (moved, apart)


def test_a_short_pong_fast_run_on_cuda_checkpoints_and_plays_back_on_the_cpu(tmp_path):
    run_dir = tmp_path / "run"
    out = train_here(
        "--preset", "pong-fast", "--device", "cuda", "--mode", "n-env", "--steps", "4096",
        "--set", "run.envs=16", "--set", "run.precision='bf16'", "--set", "env.backend='sync'",
        "--run-dir", str(run_dir),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["device"].startswith("cuda") and summary["steps"] >= 4096
    data = load_checkpoint(run_dir / "checkpoint.pt")
    assert data.learner["updates"] > 0
    assert all(t.device.type == "cpu" for t in data.learner["net"].values())
    args = ["--device", "cpu", "--max-seconds", "5", "--no-window", "--json"]
    played = play_here(str(run_dir), *args)
    assert played.returncode == 0, played.stderr
    assert len(json.loads(played.stdout)["episodes"]) == 1
