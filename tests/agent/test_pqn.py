"""PQN's learner: its targets are the Q(lambda) returns of the rollout, it makes epochs x
minibatches updates per rollout, and it fits them, in fp32 and in bf16."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from atari_speed.agent.networks import DQN
from atari_speed.agent.optim import FusedAdam, FusedRAdam
from atari_speed.agent.pqn import INFERENCE_BATCH, QLambdaLearner, quantile_huber_loss
from atari_speed.agent.rollout import RolloutStore, q_lambda_returns
from atari_speed.core.config import DQNConfig, PQNConfig
from atari_speed.core.timing import Profiler
from tests.fakes import Table as Lookup
from tests.fakes import record_autocast

SHAPE = (2, 10, 10)  # the smallest input the small CNN accepts: a fast test


def filled_rollout(
    envs: int = 4, steps: int = 8, seed: int = 0, next_value: int = 0
) -> RolloutStore:
    rng = np.random.default_rng(seed)
    rollout = RolloutStore(envs, steps, SHAPE)
    for _ in range(steps):
        rollout.put_obs(rng.integers(0, 255, (envs, *SHAPE), dtype=np.uint8))
        rollout.commit(
            rng.integers(0, 3, envs),
            rng.normal(size=envs).astype(np.float32),
            rng.random(envs) < 0.1,
            truncated=rng.random(envs) < 0.1,
            final_obs=rng.integers(0, 255, (envs, *SHAPE), dtype=np.uint8),
        )
    rollout.finish(np.full((envs, *SHAPE), next_value, np.uint8))
    return rollout


def learner(
    bf16: bool = False,
    channels_last: bool = False,
    device: str = "cpu",
    compile: bool = False,
    shape: tuple[int, ...] = SHAPE,
    quantiles: int = 0,
    **pqn,
) -> QLambdaLearner:
    torch.manual_seed(0)
    net = DQN(shape, 3, network="small", layer_norm=True, quantiles=quantiles)
    cfg = DQNConfig(
        algorithm="pqn", learning_rate=1e-3, gamma=0.9, layer_norm=True, quantiles=quantiles
    )
    return QLambdaLearner(
        net,
        cfg,
        PQNConfig(**pqn),
        torch.device(device),
        bf16=bf16,
        channels_last=channels_last,
        compile=compile,
    )


def test_targets_are_the_q_lambda_returns_of_the_online_network():
    rollout = filled_rollout(next_value=7)
    next_obs = np.full((4, *SHAPE), 7, np.uint8)
    pqn = learner(q_lambda=0.5)
    following = np.concatenate([rollout.obs[1:], next_obs[None]])
    next_values = pqn.max_q(following.reshape(-1, *SHAPE)).reshape(8, 4)
    final_values = pqn.max_q(rollout.final_obs.reshape(-1, *SHAPE)).reshape(8, 4)
    expected = q_lambda_returns(
        rollout.rewards,
        rollout.terminated,
        rollout.truncated,
        next_values,
        np.where(rollout.truncated, final_values, 0),
        0.9,
        0.5,
    )
    assert rollout.truncated.any() and rollout.terminated.any()
    assert pqn.targets(rollout) == pytest.approx(expected, abs=1e-5)


def test_learn_trains_towards_the_returns_of_the_lambda_it_is_given():
    rollout = filled_rollout(next_value=7)
    pqn = learner(q_lambda=0.5, epochs=1, minibatches=1)
    published, given = pqn.targets(rollout), pqn.targets(rollout, 0.95)
    assert pqn.targets(rollout, 0.5) == pytest.approx(published)
    assert not np.allclose(published, given), "lambda must change these returns"
    seen = []
    pqn.step = lambda o, actions, returns: seen.append((actions.numpy(), returns.numpy()))
    for lam, expected in ((0.95, given), (None, published)):
        seen.clear()
        pqn.learn(rollout, 0.0, np.random.default_rng(0), lam=lam)
        ((actions, returns),) = seen
        order = np.random.default_rng(0).permutation(32)  # the one minibatch's rows
        assert returns == pytest.approx(expected.reshape(-1)[order], abs=1e-5)
        assert np.array_equal(actions, rollout.actions.reshape(-1)[order])


def test_targets_take_the_actors_values_and_evaluate_only_the_next_observation():
    rollout = filled_rollout(next_value=7)
    pqn = learner(q_lambda=0.5)
    recomputed = pqn.targets(rollout)
    for t in range(rollout.steps):  # what n-env mode's actor records as it chooses actions
        rollout.values[t] = pqn.max_q(rollout.obs[t])
    evaluated = []
    forward = pqn.net.forward
    pqn.net.forward = lambda x: evaluated.append(len(x)) or forward(x)
    assert pqn.targets(rollout) == pytest.approx(recomputed, abs=1e-5)
    assert sum(evaluated) == 4 + rollout.truncated.sum()  # next_obs and final observations
    rollout.values[3, 1] = np.nan  # one missing: every row is evaluated again
    evaluated.clear()
    assert pqn.targets(rollout) == pytest.approx(recomputed, abs=1e-5)
    assert sum(evaluated) == 8 * 4 + rollout.truncated.sum()


@pytest.mark.parametrize("bf16", [False, True])
def test_learn_makes_epochs_times_minibatches_updates_and_fits(bf16):
    rollout = filled_rollout()
    pqn = learner(bf16=bf16, epochs=3, minibatches=4, lr_decay=False)
    rng = np.random.default_rng(0)
    pqn.learn(rollout, 0.0, rng)
    assert pqn.updates == 12
    first = pqn.pop_loss()
    for _ in range(15):
        pqn.learn(rollout, 0.0, rng)
    assert pqn.pop_loss() < 0.5 * first


def test_learn_makes_the_share_of_its_updates_it_is_given_and_at_least_one():
    rollout = filled_rollout()
    pqn = learner(epochs=3, minibatches=4, lr_decay=False)
    seen = []
    step = pqn.step
    pqn.step = lambda obs, actions, returns: seen.append(len(obs)) or step(obs, actions, returns)
    pqn.learn(rollout, 0.0, np.random.default_rng(0), share=0.5)
    assert pqn.updates == 6 and seen == [8] * 6  # 1.5 epochs of minibatches of 32 / 4
    pqn.learn(rollout, 0.0, np.random.default_rng(0), share=0.0)
    assert pqn.updates == 7


def test_learning_rate_decays_linearly_with_progress():
    pqn = learner(epochs=1, minibatches=1, lr_decay=True)
    pqn.learn(filled_rollout(), 0.75, np.random.default_rng(0))
    assert pqn.optimizer.param_groups[0]["lr"] == pytest.approx(0.25e-3)
    assert isinstance(pqn.optimizer, torch.optim.RAdam)  # the default


def test_channels_last_is_the_same_math_in_another_layout():
    rollout = filled_rollout()
    plain, last = learner(minibatches=4), learner(minibatches=4, channels_last=True)
    conv = last.net.conv[0].weight
    assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
    for pqn in (plain, last):
        pqn.learn(rollout, 0.0, np.random.default_rng(0))
    assert plain.updates == last.updates == 16
    moved = [
        (p - q).abs().max().item()
        for p, q in zip(plain.net.parameters(), learner().net.parameters(), strict=True)
    ]
    assert max(moved) > 1e-4  # the updates changed the weights ...
    for p, q in zip(plain.net.parameters(), last.net.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-5)  # ... and alike in both layouts


def test_compiled_updates_are_the_same_math_on_the_same_parameters():
    rollout = filled_rollout()
    plain, compiled = learner(minibatches=4), learner(minibatches=4, compile=True)
    assert compiled.train_net is not compiled.net  # the updates go through torch.compile
    for pqn in (plain, compiled):
        pqn.learn(rollout, 0.0, np.random.default_rng(0))
    assert not compiled.compile_pending and compiled.train_net is not compiled.net
    moved = [
        (p - q).abs().max().item()
        for p, q in zip(plain.net.parameters(), learner().net.parameters(), strict=True)
    ]
    assert max(moved) > 1e-4  # the updates changed the weights ...
    for p, q in zip(plain.net.parameters(), compiled.net.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-5)  # ... and the network the actor uses alike


def test_compiled_bf16_gradients_are_as_close_to_fp32_as_uncompiled_bf16s():
    shape = (4, 42, 42)  # pong-fast's frames: the small network's real sizes
    rng = np.random.default_rng(0)
    obs = torch.from_numpy(rng.integers(0, 255, (64, *shape), dtype=np.uint8))
    actions = torch.from_numpy(rng.integers(0, 3, 64))
    returns = torch.from_numpy(rng.normal(size=64).astype(np.float32))

    def gradients(**kind):
        pqn = learner(shape=shape, channels_last=True, **kind)  # the same initial weights
        pqn.gradients(obs, actions, returns)
        assert (pqn.train_net is not pqn.net) == kind.get("compile", False)  # compiled or not
        return [p.grad.clone() for p in pqn.net.parameters()]

    fp32, eager = gradients(), gradients(bf16=True)
    compiled = gradients(bf16=True, compile=True)
    for f, e, c in zip(fp32, eager, compiled, strict=True):
        off_eager, off_compiled = ((g - f).norm() / f.norm() for g in (e, c))
        assert 0 < off_compiled < max(1.5 * off_eager, 1e-3)  # bf16's rounding, no more


class FailsBackward(torch.autograd.Function):
    """The identity, whose backward raises: a compiler that fails on the backward pass."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found\nmore")


@pytest.mark.parametrize("failing", ["forward", "backward"])
def test_a_compile_that_fails_says_so_and_the_updates_go_on_uncompiled(
    monkeypatch, capsys, failing
):
    def no_compiler(module):
        def call(x):
            if failing == "forward":
                raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found\nmore")
            return FailsBackward.apply(module(x))

        return call

    monkeypatch.setattr(torch, "compile", no_compiler)
    rollout = filled_rollout()
    plain, failed = learner(minibatches=4), learner(minibatches=4, compile=True)
    for pqn in (plain, failed):
        pqn.learn(rollout, 0.0, np.random.default_rng(0))
    assert failed.updates == 16 and failed.train_net is failed.net
    err = capsys.readouterr().err
    assert err.count("run.compile: torch.compile failed") == 1  # once, not per update
    assert "No working C++ compiler found" in err and "more" not in err
    for p, q in zip(plain.net.parameters(), failed.net.parameters(), strict=True):
        assert torch.equal(p, q)  # the failed pass changed nothing: the same updates


class Table(torch.nn.Module):
    """max_a Q(s, a) = the observation's first pixel (action 1), 0 for action 0."""

    def __init__(self) -> None:
        super().__init__()
        self.unused = torch.nn.Parameter(torch.zeros(1))  # the optimizer needs one

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = x.reshape(len(x), -1)[:, 0].float()
        return torch.stack([torch.zeros_like(v), v], dim=1)


def test_targets_when_the_last_row_terminates_one_env_and_truncates_another():
    # gamma 0.9, lambda 0.5. Row 0: every env goes on into an observation worth 10. Row 1
    # (the last): env 0 terminates, env 1 is truncated (final observation worth 50), env 2
    # goes on into the observation after the rollout, worth 30 (as are the new episodes
    # envs 0 and 1 start there, which must not be bootstrapped from).
    store = RolloutStore(3, 2, (1, 1, 1))
    store.put_obs(np.zeros((3, 1, 1, 1), np.uint8))
    store.commit(np.zeros(3), np.ones(3), np.zeros(3, bool))
    store.put_obs(np.full((3, 1, 1, 1), 10, np.uint8))
    store.commit(
        np.zeros(3),
        np.full(3, 2.0),
        np.array([True, False, False]),
        truncated=np.array([False, True, False]),
        final_obs=np.full((3, 1, 1, 1), 50, np.uint8),
    )
    store.finish(np.full((3, 1, 1, 1), 30, np.uint8))
    pqn = QLambdaLearner(
        Table(),
        DQNConfig(algorithm="pqn", gamma=0.9),
        PQNConfig(q_lambda=0.5),
        torch.device("cpu"),
    )
    last = [2.0, 2 + 0.9 * 50, 2 + 0.9 * 30]
    first = [1 + 0.9 * (0.5 * g + 0.5 * 10) for g in last]
    assert pqn.targets(store) == pytest.approx(np.array([first, last]))


def test_a_learner_restored_from_its_state_goes_on_exactly_as_the_original():
    rollout = filled_rollout()
    original = learner(epochs=1, minibatches=2, lr_decay=False)
    original.learn(rollout, 0.0, np.random.default_rng(0))
    state = copy.deepcopy(original.state_dict())  # as read from disk: no shared tensors
    assert set(state) == {"net", "optimizer", "updates"} and state["updates"] == 2
    restored = learner(epochs=1, minibatches=2, lr_decay=False)
    torch.manual_seed(5)
    restored.net.head[-1].bias.data.normal_()  # not the original's weights until loaded
    restored.load_state_dict(state)
    for pqn in (original, restored):
        pqn.learn(rollout, 0.0, np.random.default_rng(1))
    for (name, p), q in zip(
        original.net.state_dict().items(), restored.net.state_dict().values(), strict=True
    ):
        assert torch.equal(p, q), name
    assert restored.updates == 4
    assert restored.optimizer.state_dict()["state"][0]["step"] == 4  # RAdam's state came too


def hand_set(huber: bool = False, **pqn) -> QLambdaLearner:
    """Q(s0) = (0, 3), Q(s1) = (1, 5); learning rate 0.1, Adam's eps 0.5."""
    cfg = DQNConfig(algorithm="pqn", learning_rate=0.1, adam_eps=0.5, huber=huber)
    net = Lookup([[0.0, 3.0], [1.0, 5.0]])
    return QLambdaLearner(net, cfg, PQNConfig(**pqn), torch.device("cpu"))


def step_towards(pqn: QLambdaLearner, target: float) -> None:
    """One update of Q(s0, 1) towards ``target``."""
    pqn.step(
        torch.zeros((1, 1, 1, 1), dtype=torch.uint8), torch.tensor([1]), torch.tensor([target])
    )


def blank_step(pqn: QLambdaLearner) -> None:
    """One update on two blank frames of SHAPE: action 0, return 0."""
    obs = torch.zeros((2, *SHAPE), dtype=torch.uint8)
    pqn.step(obs, torch.zeros(2, dtype=torch.int64), torch.zeros(2))


@pytest.mark.parametrize(
    ("optimizer", "huber", "max_grad_norm", "moved"),
    [
        # (q - 2.8)^2 at q = 3: gradient 0.4. RAdam's first step is unrectified: the
        # bias-corrected momentum times the learning rate, 0.1 * 0.4
        ("radam", False, 0.0, 0.1 * 0.4),
        ("radam", True, 0.0, 0.1 * 0.2),  # Huber within 1 of the target: gradient 0.2
        ("radam", False, 0.1, 0.1 * 0.1),  # the gradient's norm 0.4 clipped to 0.1
        ("radam", False, 1.0, 0.1 * 0.4),  # ... and not where it is within the norm
        ("adam", False, 0.0, 0.1 * 0.4 / (0.4 + 0.5)),  # Adam: lr * g / (|g| + eps)
    ],
)
def test_one_step_with_hand_set_q_values(optimizer, huber, max_grad_norm, moved):
    pqn = hand_set(huber, optimizer=optimizer, max_grad_norm=max_grad_norm)
    step_towards(pqn, 2.8)
    q = pqn.net.q.detach()
    assert q[0, 1].item() == pytest.approx(3 - moved, rel=1e-6)
    assert q[0, 0] == 0.0 and q[1].tolist() == [1.0, 5.0], "only the taken action moves"
    assert pqn.pop_loss() == pytest.approx(0.02 if huber else 0.04, rel=1e-5)
    assert pqn.updates == 1


@pytest.mark.parametrize("channels_last", [False, True])
def test_every_transition_is_trained_on_once_per_epoch_with_its_own_target(channels_last):
    rollout = filled_rollout()
    rollout.actions[:] = np.arange(32).reshape(8, 4)  # names each transition
    pqn = learner(epochs=3, minibatches=4, channels_last=channels_last)
    targets = pqn.targets(rollout).reshape(-1)
    obs = rollout.obs.reshape(32, *SHAPE)
    seen = []

    def step(o: torch.Tensor, actions: torch.Tensor, returns: torch.Tensor) -> None:
        assert len(actions) == 8  # 32 transitions in 4 minibatches
        taken = actions.numpy()
        assert np.array_equal(o.numpy(), obs[taken]) and returns.numpy() == pytest.approx(
            targets[taken]
        )
        layout = torch.channels_last if channels_last else torch.contiguous_format
        assert o.is_contiguous(memory_format=layout)  # in the network's layout already
        seen.extend(taken.tolist())

    pqn.step = step
    pqn.learn(rollout, 0.0, np.random.default_rng(0))
    assert len(seen) == 3 * 32
    for epoch in range(3):
        assert sorted(seen[32 * epoch : 32 * (epoch + 1)]) == list(range(32))
    assert seen[:32] != seen[32:64], "each epoch shuffles anew"


@pytest.mark.parametrize(("progress", "lr"), [(0.0, 0.1), (0.5, 0.05), (1.5, 0.0)])
def test_learning_rate_follows_the_decay_given_and_is_never_negative(progress, lr):
    # whether it decays, and with what, is schedules.lr_factor's (tests/agent/test_schedules.py)
    pqn = hand_set(epochs=1, minibatches=1)
    rollout = RolloutStore(1, 1, (1, 1, 1))
    rollout.put_obs(np.zeros((1, 1, 1, 1), np.uint8))
    rollout.commit(np.ones(1), np.zeros(1), np.array([True]))
    rollout.finish(np.zeros((1, 1, 1, 1), np.uint8))
    pqn.learn(rollout, progress, np.random.default_rng(0))
    assert pqn.optimizer.param_groups[0]["lr"] == pytest.approx(lr)


def test_the_epsilon_given_is_the_optimizers_and_a_large_one_damps_the_steps():
    # which epsilon the score sets is schedules.adam_eps's (tests/agent/test_schedules.py)
    rollout = filled_rollout()
    start = [p.detach().clone() for p in learner().net.parameters()]
    moved = {}
    for eps in (None, 1e-8, 10.0):
        # Adam: RAdam's first few steps do not divide by the gradients' root at all
        pqn = learner(epochs=1, minibatches=1, optimizer="adam")
        pqn.learn(rollout, 0.0, np.random.default_rng(0), eps=eps)
        expected = pqn.cfg.adam_eps if eps is None else eps
        assert pqn.optimizer.param_groups[0]["eps"] == expected
        moved[eps] = max(
            (p.detach() - p0).abs().max().item()
            for p, p0 in zip(pqn.net.parameters(), start, strict=True)
        )
    # the same first step with the constructor's epsilon (1e-8); one far above the
    # gradients' size moves every weight far less than the learning rate
    assert moved[None] == pytest.approx(moved[1e-8])
    assert moved[10.0] < moved[1e-8] / 10


def test_the_update_phases_are_timed_under_their_report_names():
    pqn = learner(epochs=2, minibatches=4)
    pqn.prof = Profiler(enabled=True)
    pqn.learn(filled_rollout(), 0.0, np.random.default_rng(0))
    assert pqn.prof.calls == {"returns": 1, "host-to-device copy": 1, "sgd step": 8}


@pytest.mark.parametrize("bf16", [False, True])
def test_bf16_autocasts_the_networks_passes_and_fp32_does_not(bf16):
    pqn = learner(bf16=bf16)
    dtypes = []
    pqn.net.conv[0].register_forward_hook(lambda _, __, out: dtypes.append(out.dtype))
    obs = filled_rollout().obs[0]
    values = pqn.max_q(obs)
    step_obs = torch.from_numpy(obs)
    pqn.step(step_obs, torch.zeros(4, dtype=torch.int64), torch.zeros(4))
    assert dtypes == [torch.bfloat16 if bf16 else torch.float32] * 2
    if not bf16:  # exactly the fp32 network's own values
        with torch.no_grad():
            assert values.tolist() == learner().net(step_obs).max(dim=1).values.tolist()


@pytest.mark.parametrize("act_bf16", [False, True])
def test_the_last_rows_values_are_computed_in_the_actors_precision(act_bf16):
    # the actor's values fill rows 1..T-1; the observation after the last row is evaluated
    # here, as the actor would have: under bf16 autocast where it acts in bf16
    rollout = filled_rollout(next_value=7)
    torch.manual_seed(0)
    net = DQN(SHAPE, 3, network="small", layer_norm=True)
    cfg = DQNConfig(algorithm="pqn", learning_rate=1e-3, gamma=0.9, layer_norm=True)
    pqn = QLambdaLearner(
        net, cfg, PQNConfig(q_lambda=0.5), torch.device("cpu"), bf16=True, act_bf16=act_bf16
    )
    rollout.values[:] = 0.0
    dtypes = []
    pqn.net.conv[0].register_forward_hook(lambda _, __, out: dtypes.append(out.dtype))
    pqn.targets(rollout)
    assert dtypes[0] == (torch.bfloat16 if act_bf16 else torch.float32)


def test_max_q_goes_over_any_number_of_observations_in_chunks():
    pqn = QLambdaLearner(Table(), DQNConfig(algorithm="pqn"), PQNConfig(), torch.device("cpu"))
    obs = (np.arange(2 * INFERENCE_BATCH + 5) % 256).astype(np.uint8).reshape(-1, 1, 1, 1)
    assert pqn.max_q(obs).tolist() == obs.reshape(-1).tolist()  # max_a Q = the pixel
    empty = pqn.max_q(obs[:0])
    assert empty.shape == (0,) and empty.dtype == np.float32


def test_the_network_goes_to_the_learners_device():
    # torch's "meta" device holds tensors without data: no GPU is needed to see the move
    pqn = QLambdaLearner(
        Lookup([[0.0]]), DQNConfig(algorithm="pqn"), PQNConfig(), torch.device("meta")
    )
    assert pqn.net.q.device.type == "meta"


def test_a_learner_made_with_the_defaults_runs_fp32_in_the_default_layout():
    torch.manual_seed(0)
    net = DQN(SHAPE, 3, network="small", layer_norm=True)
    pqn = QLambdaLearner(net, DQNConfig(algorithm="pqn"), PQNConfig(), torch.device("cpu"))
    dtypes = []
    pqn.net.conv[0].register_forward_hook(lambda _, __, out: dtypes.append(out.dtype))
    blank_step(pqn)
    assert dtypes == [torch.float32]
    assert pqn.net.conv[0].weight.is_contiguous()


def test_one_step_runs_on_the_learners_device_whatever_device_its_batch_is_on():
    # On torch's "meta" device (tensors without data): a loss against returns left on the
    # CPU raises.
    pqn = QLambdaLearner(
        Lookup([[0.0, 1.0, 2.0]]), DQNConfig(algorithm="pqn"), PQNConfig(), torch.device("meta")
    )
    assert pqn.losses._sum.device.type == "meta"
    obs = torch.zeros((2, 1, 1, 1), dtype=torch.uint8)
    pqn.step(obs, torch.tensor([0, 2]), torch.tensor([1.0, 2.0]))
    assert pqn.updates == 1 and pqn.losses._sum.device.type == "meta"


@pytest.mark.parametrize("optimizer", ["adam", "radam"])
def test_the_optimizer_runs_fused_or_else_foreach(optimizer):
    # both are the same math over all tensors at once, faster on a CPU for a small network
    # than a loop (benchmarks/sgd_step.py --pqn); only the options show which runs
    fused = learner(optimizer=optimizer, fused_optimizer=True).optimizer
    assert isinstance(fused, FusedRAdam if optimizer == "radam" else FusedAdam)
    assert fused.param_groups[0]["fused"] is True
    torchs = learner(optimizer=optimizer).optimizer  # the default
    assert isinstance(torchs, torch.optim.RAdam if optimizer == "radam" else torch.optim.Adam)
    assert torchs.param_groups[0]["foreach"] is True and not isinstance(torchs, FusedAdam)
    # a device without the fused kernel keeps torch's
    meta = QLambdaLearner(
        DQN(SHAPE, 3, network="small"),
        DQNConfig(algorithm="pqn"),
        PQNConfig(fused_optimizer=True),
        torch.device("meta"),
    )
    assert isinstance(meta.optimizer, torch.optim.RAdam)
    assert not isinstance(meta.optimizer, FusedAdam)


def test_every_step_counts_one_update():
    pqn = learner()
    for _ in range(3):
        blank_step(pqn)
    assert pqn.updates == 3


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_bf16_autocast_asks_for_bf16_on_every_device(monkeypatch, device):
    # CUDA's autocast defaults to fp16, which would need a loss scaler PQN does not have;
    # on a CPU the default is bf16 already, so only the argument can show it.
    pqn = learner(bf16=True)
    pqn.device = torch.device(device)
    asked = record_autocast(monkeypatch)
    with pqn.autocast():
        pass
    assert asked == [(device, torch.bfloat16)]


def test_a_step_moves_the_observations_actions_and_returns_to_the_learners_device(
    monkeypatch,
):
    # A CPU learner told its device is CUDA; the copies are logged, not made.
    pqn = QLambdaLearner(
        Lookup([[0.0, 1.0]]), DQNConfig(algorithm="pqn"), PQNConfig(), torch.device("cpu")
    )
    pqn.device = torch.device("cuda")
    moved: dict[int, str] = {}

    def to(tensor: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        device = args[0] if args else kwargs.get("device")
        moved[id(tensor)] = str(device)
        return tensor

    monkeypatch.setattr(torch.Tensor, "to", to)
    inputs = (
        torch.zeros((3, 1, 2, 2), dtype=torch.uint8),
        torch.tensor([0, 1, 1]),
        torch.tensor([0.5, 0.0, 1.0]),
    )
    pqn.step(*inputs)
    assert [moved.get(id(t)) for t in inputs] == ["cuda"] * 3
    assert pqn.updates == 1


@pytest.mark.parametrize("channels_last", [True, False])
def test_a_minibatch_has_the_rows_of_its_indices_in_the_rollouts_layout(channels_last):
    from atari_speed.agent.pqn import rows

    frames = torch.randint(0, 256, (64, 4, 6, 5), dtype=torch.uint8)
    if channels_last:
        frames = frames.contiguous(memory_format=torch.channels_last)
    index = torch.tensor([7, 0, 63, 7, 12])
    got = rows(frames, index)
    assert torch.equal(got, frames[index])
    layout = torch.channels_last if channels_last else torch.contiguous_format
    assert got.is_contiguous(memory_format=layout)
    returns = torch.arange(64, dtype=torch.float32)
    assert torch.equal(rows(returns, index), returns[index])


def test_the_quantile_loss_is_least_at_the_quantiles_of_the_targets():
    targets = torch.linspace(0.0, 100.0, 1001)  # uniform: its tau-quantile is 100 tau
    quantiles = torch.full((1, 4), 50.0, requires_grad=True)
    optimizer = torch.optim.Adam([quantiles], lr=1.0)
    for _ in range(400):
        optimizer.zero_grad()
        quantile_huber_loss(quantiles.expand(len(targets), 4), targets).backward()
        optimizer.step()
    # the i-th for the fraction (2i + 1) / 8: 12.5, 37.5, 62.5, 87.5
    assert quantiles.detach()[0].tolist() == pytest.approx([12.5, 37.5, 62.5, 87.5], abs=1.0)


@pytest.mark.parametrize("bf16", [False, True])
def test_a_learner_with_quantiles_fits_its_returns_and_acts_on_their_mean(bf16):
    rollout = filled_rollout()
    pqn = learner(bf16=bf16, quantiles=8, epochs=3, minibatches=4, lr_decay=False)
    rng = np.random.default_rng(0)
    pqn.learn(rollout, 0.0, rng)
    first = pqn.pop_loss()
    for _ in range(15):
        pqn.learn(rollout, 0.0, rng)
    assert pqn.pop_loss() < 0.5 * first
    obs = torch.from_numpy(rollout.obs[0])
    with torch.no_grad(), pqn.autocast():  # max_q's precision
        per = pqn.net(obs, True)
    assert pqn.max_q(rollout.obs[0]) == pytest.approx(per.mean(dim=2).max(dim=1).values.numpy())
    spread = (per[..., -1] - per[..., 0]).mean().item()
    assert spread > 0.1, "the returns differ from row to row: the quantiles must spread"
