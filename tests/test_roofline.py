"""benchmarks/roofline.py: the arithmetic it counts from the layers' shapes, and the part
each profiled operator is grouped into."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("roofline", ROOT / "benchmarks/roofline.py")
roofline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(roofline)


def test_flops_follow_the_layer_shapes():
    net = roofline.DQN(roofline.SHAPES["small"], roofline.ACTIONS, network="small", layer_norm=True)
    flops = roofline.layer_flops(net, batch=2)
    # conv 1: 4 -> 16 channels, 4x4 stride 2 over 42x42 -> 20x20; conv 2: 16 -> 32, 9x9
    conv1 = 2 * 2 * 16 * 20 * 20 * 4 * 16
    conv2 = 2 * 2 * 32 * 9 * 9 * 16 * 16
    assert flops["conv forward"] == conv1 + conv2
    # the first conv's input is the frames: no input gradient, only the weights'
    assert flops["conv backward"] == conv1 + 2 * conv2
    linear = 2 * 2 * (2592 * 256 + 256 * 6)
    assert flops["linear (forward and backward)"] == 3 * linear


def test_flops_of_atari_84s_network():
    net = roofline.DQN(roofline.SHAPES["nature"], roofline.ACTIONS, network="nature")
    flops = roofline.layer_flops(net, batch=1, network="nature")
    # 84x84 -> 20x20 (8x8 stride 4, 32) -> 9x9 (4x4 stride 2, 64) -> 7x7 (3x3, 64)
    convs = [20 * 20 * 32 * 8 * 8 * 4, 9 * 9 * 64 * 4 * 4 * 32, 7 * 7 * 64 * 3 * 3 * 64]
    assert flops["conv forward"] == 2 * sum(convs)
    assert flops["conv backward"] == 2 * (convs[0] + 2 * convs[1] + 2 * convs[2])
    assert flops["linear (forward and backward)"] == 3 * 2 * (3136 * 512 + 512 * 6)


@pytest.mark.parametrize(
    ("fused", "optimizer_ops"),
    [
        (False, {"aten::_foreach_lerp_", "aten::_foreach_addcmul_"}),  # torch's RAdam
        # pqn.fused_optimizer: RAdam's first five steps by hand, then fused Adam's
        (True, {"aten::_fused_adam_", "aten::lerp_"}),
    ],
)
def test_ops_are_grouped_by_name_and_the_optimizer_by_where_they_ran(fused, optimizer_ops):
    learner = roofline.learner(bf16=False, fused=fused)
    obs = torch.zeros(4, *roofline.SHAPES["small"], dtype=torch.uint8)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(7):  # past RAdam's first five steps
            learner.step(obs, torch.zeros(4, dtype=torch.long), torch.ones(4))
    parts = {}
    for event in prof.events():
        parts.setdefault(roofline.part_of(event), set()).add(event.name)
    assert "aten::convolution_backward" in parts["conv backward"]
    assert "aten::threshold_backward" in parts["ReLU (forward and backward)"]
    assert optimizer_ops <= parts[roofline.OPTIMIZER]
    # an op inside the optimizer's step counts there, not under its own name's part
    assert not optimizer_ops & parts.get("other", set())


def test_without_bf16_units_bf16_is_timed_not_tabled(monkeypatch, capsys):
    # bf16 emulated: its profile files the convs under other names against a ~1 GFLOP/s
    # ceiling, so it is one timed line beside the fp32 table, not a table of its own
    monkeypatch.setattr(roofline, "cpu_info", lambda: ("Some CPU", []))
    monkeypatch.setattr(roofline, "MINIBATCH", 8)
    monkeypatch.setattr(
        "sys.argv", ["roofline.py", "--reps", "1", "--updates", "1", "--matmul", "64"]
    )
    roofline.main()
    out = capsys.readouterr().out
    assert "(bf16 units: none)" in out
    assert out.count("| part | ms per update |") == 1  # fp32's table only
    assert "of the fp32 matmul ceiling |" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("### one update, bf16:"))
    assert re.search(r"\d+\.\dx the fp32 update's time: this CPU has no bf16 units", line)


def test_with_bf16_units_acting_is_timed_in_both_precisions(monkeypatch, capsys):
    # where the CPU has bf16 units the acting line has a bf16 twin and both updates get a
    # table by part
    monkeypatch.setattr(roofline, "cpu_info", lambda: ("Some CPU", ["avx512_bf16"]))
    monkeypatch.setattr(roofline, "MINIBATCH", 8)
    monkeypatch.setattr(
        "sys.argv", ["roofline.py", "--reps", "1", "--updates", "1", "--matmul", "64", "--act", "4"]
    )
    roofline.main()
    out = capsys.readouterr().out
    assert re.search(r"^acting: one fp32 forward pass of 4 envs' frames", out, re.M)
    line = next(ln for ln in out.splitlines() if ln.startswith("acting under bf16 autocast:"))
    assert re.search(r"\d+\.\d ms, \d+\.\d\dx fp32's speed", line)
    assert out.count("| part | ms per update |") == 2
    assert "of the bf16 matmul ceiling |" in out


def test_the_fp32_frames_lever_is_the_same_network_the_old_way():
    """The lever row times the network as it scaled its frames before: same output, so
    only the time differs."""
    pqn = roofline.learner(bf16=True, network="small")
    obs = roofline.minibatch("small")[0][:8]
    with pqn.autocast():
        today = pqn.net(obs)
        before = roofline.forward_fp32_frames(pqn.net, obs)
    torch.testing.assert_close(today, before, rtol=0, atol=0)
