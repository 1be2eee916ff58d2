"""FusedRAdam and FusedAdam against torch's own RAdam and Adam."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from atari_speed.agent.optim import FusedAdam, FusedRAdam, make_optimizer, rectification

STEPS = 40


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(12, 16), torch.nn.LayerNorm(16), torch.nn.ReLU(), torch.nn.Linear(16, 3)
    )


def train(net: torch.nn.Module, opt: torch.optim.Optimizer, steps: range) -> None:
    """Steps on batches fixed by the step's number, the rate and epsilon scheduled as a
    run's learner sets them between steps."""
    for t in steps:
        gen = torch.Generator().manual_seed(t)
        x, y = torch.randn(8, 12, generator=gen), torch.randn(8, 3, generator=gen)
        for group in opt.param_groups:
            group["lr"] = 1e-2 * (1.0 - t / 100)
            group["eps"] = 1e-8 if t < 20 else 1e-3
        opt.zero_grad()
        torch.nn.functional.mse_loss(net(x), y).backward()
        opt.step()


def furthest(a: torch.nn.Module, b: torch.nn.Module) -> float:
    return max(
        (pa - pb).abs().max().item() for pa, pb in zip(a.parameters(), b.parameters(), strict=True)
    )


def test_rectification_starts_after_radams_first_five_steps():
    assert [rectification(t, 0.999) is None for t in range(1, 8)] == [True] * 5 + [False] * 2
    assert 0.0 < rectification(6, 0.999) < rectification(1000, 0.999) < 1.0


@pytest.mark.parametrize("fused", [FusedRAdam, FusedAdam])
def test_the_fused_steps_are_torchs_to_within_float32_rounding(fused):
    reference = torch.optim.RAdam if fused is FusedRAdam else torch.optim.Adam
    a, b = model(), model()
    train(a, reference(a.parameters(), foreach=True), range(STEPS))
    train(b, fused(b.parameters()), range(STEPS))
    moved = furthest(a, model())
    assert moved > 0.01, "the steps moved the weights"
    assert furthest(a, b) < 1e-6 * moved * STEPS


@pytest.mark.parametrize(("saved_by", "loaded_by"), [("torch", "fused"), ("fused", "torch")])
@pytest.mark.parametrize("at", [3, 10])  # before RAdam's rectification and after
def test_a_state_saved_by_one_goes_on_in_the_other(saved_by, loaded_by, at):
    def radam(kind: str, net: torch.nn.Module) -> torch.optim.Optimizer:
        return make_optimizer(net.parameters(), "radam", 1e-2, 1e-8, fused=kind == "fused")

    whole = model()
    train(whole, torch.optim.RAdam(whole.parameters(), foreach=True), range(STEPS))

    first = model()
    opt = radam(saved_by, first)
    train(first, opt, range(at))
    state = copy.deepcopy(opt.state_dict())
    second = copy.deepcopy(first)
    resumed = radam(loaded_by, second)
    resumed.load_state_dict(state)
    train(second, resumed, range(at, STEPS))

    assert furthest(whole, second) < 1e-6 * furthest(whole, model()) * STEPS
    group = resumed.param_groups[0]
    if loaded_by == "fused":
        assert resumed.steps == STEPS and group["fused"] is True
    else:  # torch's RAdam reads a group that says fused as one that is not foreach
        assert group["foreach"] is True and "fused" not in group
        assert all(s["step"].device.type == "cpu" for s in resumed.state.values())


def test_fused_adam_stays_fused_after_loading_a_foreach_adams_state():
    net = model()
    opt = torch.optim.Adam(net.parameters(), foreach=True)
    train(net, opt, range(3))
    fused = FusedAdam(net.parameters())
    fused.load_state_dict(opt.state_dict())
    group = fused.param_groups[0]
    assert group["fused"] is True and group["foreach"] is None
    assert all(s["step"].dtype == torch.float32 for s in fused.state.values())


@pytest.mark.parametrize("setting", [{"weight_decay": 0.1}, {"maximize": True}])
def test_a_state_the_fused_step_has_no_code_for_is_refused(setting):
    net = model()
    opt = torch.optim.RAdam(net.parameters(), **setting)
    train(net, opt, range(2))
    with pytest.raises(ValueError, match=next(iter(setting))):
        FusedRAdam(net.parameters()).load_state_dict(opt.state_dict())


def test_a_step_with_some_weights_without_gradients_is_refused():
    # one step count serves all weights: one that skipped a step would be off by one
    net = model()
    opt = FusedRAdam(net.parameters())
    train(net, opt, range(2))
    net(torch.randn(2, 12)).sum().backward()
    net[3].bias.grad = None
    with pytest.raises(ValueError, match="no gradient"):
        opt.step()


def test_the_optimizer_hooks_run_once_a_step_even_where_adams_step_is_wrapped():
    torch.optim.Adam(model().parameters())  # a plain Adam: torch wraps Adam.step with the hooks
    calls = []
    handle = register_optimizer_step_pre_hook(
        lambda opt, args, kwargs: calls.append(type(opt).__name__)
    )
    try:
        net = model()
        train(net, FusedRAdam(net.parameters()), range(8))  # momentum steps and fused ones
    finally:
        handle.remove()
    assert calls == ["FusedRAdam"] * 8


def test_fused_radam_takes_one_param_group():
    net = model()
    groups = [{"params": net[0].parameters()}, {"params": net[3].parameters()}]
    with pytest.raises(ValueError, match="one param group"):
        FusedRAdam(groups)
