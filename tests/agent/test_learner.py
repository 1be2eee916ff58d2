"""The learner reaches the known Q-values of a tiny deterministic problem."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from atari_speed.agent.learner import TENSORS, Learner, LossMeter
from atari_speed.agent.networks import DQN
from atari_speed.agent.replay import Batch
from atari_speed.core.config import DQNConfig
from atari_speed.core.timing import Profiler
from tests.fakes import Table, record_autocast

SHAPE = (1, 36, 36)  # the smallest input the Nature CNN accepts
GAMMA = 0.9


def chain_batch(n_steps: int) -> Batch:
    """Three states, told apart by brightness. A: action 0 pays 1 and ends, action 1 pays 0
    and moves to B. B: action 0 pays 2 and ends, action 1 pays 0 and moves to C. C: any
    action pays 3 and ends. Q*(C) = 3; Q*(B) = (2, 0.9*3 = 2.7); Q*(A) = (1, 0.9*2.7 = 2.43).

    With n_steps=2, A's action 1 is the 2-step transition A -> B -> C (returns 0, then
    bootstraps from C with gamma**2), and B's action 1 is B -> C -> end (returns 0.9*3).
    """
    a, b, c = (np.full(SHAPE, v, np.uint8) for v in (0, 128, 255))
    rows = [(a, 0, 1.0, True, a), (b, 0, 2.0, True, a), (c, 0, 3.0, True, a), (c, 1, 3.0, True, a)]
    if n_steps == 1:
        rows += [(a, 1, 0.0, False, b), (b, 1, 0.0, False, c)]
    else:
        rows += [(a, 1, 0.0, False, c), (b, 1, GAMMA * 3.0, True, a)]
    ended = np.array([r[3] for r in rows] * 6)
    return Batch(
        states=np.stack([r[0] for r in rows] * 6),
        actions=np.array([r[1] for r in rows] * 6, np.int64),
        returns=np.array([r[2] for r in rows] * 6, np.float32),
        discounts=np.where(ended, 0.0, GAMMA**n_steps).astype(np.float32),
        next_states=np.stack([r[4] for r in rows] * 6),
    )


@pytest.mark.parametrize(
    ("double", "dueling", "n_steps", "huber"),
    [(False, False, 1, False), (True, True, 1, True), (False, False, 2, False)],
)
def test_learner_reaches_the_known_q_values(double, dueling, n_steps, huber):
    torch.manual_seed(0)
    cfg = DQNConfig(
        learning_rate=1e-3,
        gamma=GAMMA,
        batch_size=32,
        target_sync=20,
        n_steps=n_steps,
        double=double,
        dueling=dueling,
        huber=huber,
    )
    learner = Learner(DQN(SHAPE, 2, dueling=dueling), cfg, torch.device("cpu"))
    batch = chain_batch(n_steps)
    for _ in range(250):  # 250 reach Q* within 0.02 in all three cases; 0.1 allowed
        learner.step(batch)
    assert learner.pop_loss() is not None and learner.pop_loss() is None
    with torch.no_grad():
        q = learner.net(torch.from_numpy(batch.states[:3])).numpy()
    assert q[0] == pytest.approx([1.0, 2.43], abs=0.1)
    assert q[1] == pytest.approx([2.0, 2.7], abs=0.1)
    assert q[2] == pytest.approx([3.0, 3.0], abs=0.1)


def test_target_network_syncs_every_target_sync_updates():
    cfg = DQNConfig(learning_rate=1e-2, target_sync=3)
    learner = Learner(DQN(SHAPE, 2), cfg, torch.device("cpu"))
    batch = chain_batch(1)

    def same() -> bool:
        online = learner.net.state_dict()
        target = learner.target.target_model.state_dict()
        return all(torch.equal(online[k], target[k]) for k in online)

    learner.step(batch)
    learner.step(batch)
    assert not same()
    learner.step(batch)
    assert same()


def test_bf16_autocast_path_learns_what_fp32_learns():
    # The same autocast code runs on CUDA; here it is checked on the CPU (run.precision =
    # "bf16" forces it), so the casts around the loss are tested where no GPU is at hand.
    # Convergence to Q* is the fp32 test's job above; here the bf16 learner takes the fp32
    # learner's steps from the same weights (30: this CPU emulates bf16, ~10x slower) and
    # must end where it ends, up to bf16's rounding, after both moved far from the start.
    torch.manual_seed(0)
    cfg = DQNConfig(learning_rate=1e-3, gamma=GAMMA, batch_size=32, target_sync=20, double=True)
    start = DQN(SHAPE, 2)
    batch = chain_batch(1)
    states = torch.from_numpy(batch.states[:3])
    q = {}
    for bf16 in (False, True):
        learner = Learner(copy.deepcopy(start), cfg, torch.device("cpu"), bf16=bf16)
        for _ in range(30):
            learner.step(batch)
        with torch.no_grad():
            q[bf16] = learner.net(states)
    with torch.no_grad():
        moved = (q[False] - start(states)).abs().min().item()
    assert moved > 0.5, "too few steps to tell a learner that learns from one that does not"
    assert q[True].dtype == torch.float32
    assert torch.allclose(q[True], q[False], atol=0.05), (q[True], q[False])


def test_a_channels_last_network_takes_its_frames_channels_last_and_answers_alike():
    torch.manual_seed(0)
    plain = DQN((4, 42, 42), 6, network="small", layer_norm=True)
    last = DQN((4, 42, 42), 6, network="small", layer_norm=True)
    last.load_state_dict(plain.state_dict())
    last.to(memory_format=torch.channels_last)
    seen = []
    for net in (plain, last):
        net.conv[0].register_forward_pre_hook(
            lambda _, args: seen.append(args[0].is_contiguous(memory_format=torch.channels_last))
        )
    frames = torch.randint(0, 255, (8, 4, 42, 42), dtype=torch.uint8)  # NCHW, as stored
    with torch.no_grad():
        assert torch.allclose(plain(frames), last(frames), atol=1e-5)
    assert seen == [False, True]  # the float frames reach the first conv in its layout


def one_transition(discount: float) -> dict[str, torch.Tensor]:
    """State 0, action 1, reward 1, next state 1 (discounted by ``discount``)."""
    return {
        "states": torch.zeros((1, 1, 2, 2), dtype=torch.uint8),
        "next_states": torch.ones((1, 1, 2, 2), dtype=torch.uint8),
        "actions": torch.tensor([1]),
        "returns": torch.tensor([1.0]),
        "discounts": torch.tensor([discount]),
    }


def one_batch(discount: float) -> Batch:
    """``one_transition`` as the replay hands it to the learner."""
    return Batch(**{k: v.numpy() for k, v in one_transition(discount).items()})


def hand_set_learner(double: bool, huber: bool, **cfg) -> Learner:
    # Online: Q(s0) = (0, 3), Q(s1) = (1, 5): argmax at s1 is action 1.
    # Target: Q(s1) = (7, 2): argmax action 0. The two targets disagree:
    # double DQN bootstraps from target[s1][online argmax = 1] = 2, plain DQN from
    # max target[s1] = 7. ``cfg``: more DQNConfig fields.
    config = DQNConfig(gamma=0.9, double=double, huber=huber, target_sync=1000, **cfg)
    learner = Learner(Table([[0.0, 3.0], [1.0, 5.0]]), config, torch.device("cpu"))
    with torch.no_grad():
        learner.target.target_model.q.copy_(torch.tensor([[0.0, 0.0], [7.0, 2.0]]))
    return learner


@pytest.mark.parametrize(
    ("double", "huber", "expected"),
    [
        # q = 3; double target 1 + 0.9 * 2 = 2.8; plain target 1 + 0.9 * 7 = 7.3
        (True, False, (3 - 2.8) ** 2),
        (False, False, (3 - 7.3) ** 2),
        (True, True, 0.5 * (3 - 2.8) ** 2),  # Huber: quadratic within 1 of the target ...
        (False, True, abs(3 - 7.3) - 0.5),  # ... linear beyond it
    ],
)
def test_dqn_loss_with_hand_set_online_and_target_nets(double, huber, expected):
    learner = hand_set_learner(double, huber)
    assert learner.loss(one_transition(0.9)).item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("double", [False, True])
def test_a_terminal_transition_bootstraps_from_nothing(double):
    learner = hand_set_learner(double, huber=False)
    assert learner.loss(one_transition(0.0)).item() == pytest.approx((3 - 1) ** 2)


def test_the_gradient_moves_only_the_taken_action_towards_its_target():
    learner = hand_set_learner(double=True, huber=False)
    learner.step(one_batch(0.9))
    q = learner.net.q.detach()
    assert q[0, 0] == 0.0 and q[1].tolist() == [1.0, 5.0], "untaken actions and s1 stay"
    assert q[0, 1] < 3.0, "Q(s0, 1) = 3 moves down towards 2.8"
    assert learner.updates == 1
    target = learner.target.target_model.q.detach()
    assert target.tolist() == [[0.0, 0.0], [7.0, 2.0]], "the target net is not trained"
    assert learner.state_dict()["updates"] == 1


def test_a_learner_restored_from_its_state_goes_on_exactly_as_the_original():
    torch.manual_seed(0)
    cfg = DQNConfig(learning_rate=1e-3, gamma=GAMMA, batch_size=32, target_sync=3)
    batch = chain_batch(1)
    original = Learner(DQN(SHAPE, 2), cfg, torch.device("cpu"))
    for _ in range(4):  # past a target sync, with Adam's moments built up
        original.step(batch)
    original.net.head[-1].bias.data += 1.0  # online and target now differ
    torch.manual_seed(1)  # another initialization: only the state can make them equal
    restored = Learner(DQN(SHAPE, 2), cfg, torch.device("cpu"))
    # a copy, as a checkpoint read from disk is: loaded as is, the optimizer's moments
    # would be the original's own tensors, stepped by both learners
    state = copy.deepcopy(original.state_dict())
    restored.load_state_dict(state)
    assert set(state) == {"net", "target", "optimizer", "updates"} and state["updates"] == 4
    for learner in (original, restored):
        learner.step(batch)
        learner.step(batch)  # the 6th update syncs the target at the same time in both
    for a, b in (
        (original.net, restored.net),
        (original.target.target_model, restored.target.target_model),
    ):
        for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
            assert torch.equal(p, q), name
    assert restored.updates == 6


def test_the_loss_meter_gives_the_mean_since_it_was_last_read():
    meter = LossMeter(torch.device("cpu"))
    assert meter.pop() is None, "no loss added: nothing to report"
    meter.add(torch.tensor(1.0, requires_grad=True))
    meter.add(torch.tensor(4.0))
    assert meter.pop() == pytest.approx(2.5)
    assert meter.pop() is None
    meter.add(torch.tensor(6.0))  # the sum and the count both started again
    assert meter.pop() == pytest.approx(6.0)


def test_adams_first_step_is_learning_rate_times_the_gradient_over_its_size_plus_eps():
    # The loss (q - 2.8)^2 at q = Q(s0, 1) = 3 has gradient 0.4. Adam's first step,
    # bias-corrected, moves q by lr * g / (|g| + eps) = 0.1 * 0.4 / (0.4 + 0.5).
    learner = hand_set_learner(double=True, huber=False, learning_rate=0.1, adam_eps=0.5)
    learner.step(one_batch(0.9))
    assert learner.net.q[0, 1].item() == pytest.approx(3 - 0.1 * 0.4 / 0.9, rel=1e-6)
    assert learner.pop_loss() == pytest.approx((3 - 2.8) ** 2, rel=1e-5)


def test_the_update_phases_are_timed_under_their_report_names():
    prof = Profiler(enabled=True)
    cfg = DQNConfig(target_sync=2)
    learner = Learner(Table([[0.0, 3.0], [1.0, 5.0]]), cfg, torch.device("cpu"), prof=prof)
    batch = one_batch(0.9)
    for _ in range(3):
        learner.step(batch)
    learner.learn(FakeReplay(batch), 0.5, np.random.default_rng(0))  # samples, then steps
    assert prof.calls == {
        "replay sample": 1,
        "host-to-device copy": 4,
        "sgd step": 4,
        "target sync": 2,
    }


@pytest.mark.parametrize("channels_last", [False, True])
def test_channels_last_puts_the_networks_conv_weights_in_that_layout(channels_last):
    learner = Learner(
        DQN((4, 10, 10), 3, network="small"),
        DQNConfig(),
        torch.device("cpu"),
        channels_last=channels_last,
    )
    weight = learner.net.conv[0].weight
    assert weight.is_contiguous(memory_format=torch.channels_last) == channels_last
    assert weight.is_contiguous() != channels_last


def two_transitions() -> dict[str, torch.Tensor]:
    """s0 -a1-> s1 (reward 1, discount 0.9) and s0 -a0-> s2 (reward 0, discount 0.5)."""
    return {
        "states": torch.zeros((2, 1, 2, 2), dtype=torch.uint8),
        "next_states": torch.tensor([1, 2], dtype=torch.uint8).reshape(2, 1, 1, 1),
        "actions": torch.tensor([1, 0]),
        "returns": torch.tensor([1.0, 0.0]),
        "discounts": torch.tensor([0.9, 0.5]),
    }


@pytest.mark.parametrize(
    ("double", "expected"),
    [
        # double: each next state's own online argmax, read off the target net:
        # s1 -> action 1, target 1 + 0.9 * 2 = 2.8; s2 -> action 0, target 0.5 * 1 = 0.5
        (True, ((3 - 2.8) ** 2 + (0 - 0.5) ** 2) / 2),
        # plain: max of the target net: 1 + 0.9 * 7 = 7.3 and 0.5 * 6 = 3
        (False, ((3 - 7.3) ** 2 + (0 - 3) ** 2) / 2),
    ],
)
def test_each_transition_of_a_batch_bootstraps_from_its_own_next_state(double, expected):
    # Online Q(s1) = (1, 5), Q(s2) = (4, 2); target Q(s1) = (7, 2), Q(s2) = (1, 6): every
    # argmax differs between rows and between the nets, so a target taken from another row
    # or from the other rule changes the loss.
    cfg = DQNConfig(gamma=0.9, double=double, huber=False, target_sync=1000)
    learner = Learner(Table([[0.0, 3.0], [1.0, 5.0], [4.0, 2.0]]), cfg, torch.device("cpu"))
    with torch.no_grad():
        learner.target.target_model.q.copy_(torch.tensor([[0.0, 0.0], [7.0, 2.0], [1.0, 6.0]]))
    assert learner.loss(two_transitions()).item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("double", [False, True])
def test_the_default_learner_computes_its_loss_in_fp32(double):
    # A naive fp32 reference from the same networks: any bf16 pass (autocast on by default,
    # or not switched off) rounds the Q-values to 8 bits and misses it by far more than 1e-6.
    torch.manual_seed(0)
    learner = Learner(DQN(SHAPE, 2), DQNConfig(gamma=GAMMA, double=double), torch.device("cpu"))
    learner.target.target_model.head[-1].bias.data += torch.tensor([0.3, -0.2])
    batch = chain_batch(1)
    b = {k: torch.from_numpy(getattr(batch, k)) for k in TENSORS}
    with torch.no_grad():
        q = learner.net(b["states"]).gather(1, b["actions"][:, None])[:, 0]
        target_q = learner.target.target_model(b["next_states"])
        if double:
            best = learner.net(b["next_states"]).argmax(dim=1, keepdim=True)
            next_q = target_q.gather(1, best)[:, 0]
        else:
            next_q = target_q.max(dim=1).values
        expected = ((q - (b["returns"] + b["discounts"] * next_q)) ** 2).mean().item()
        assert learner.loss(b).item() == pytest.approx(expected, rel=1e-6)


class FakeReplay:
    """Hands out one fixed batch and logs how it was asked: (batch_size, rng, out)."""

    def __init__(self, batch: Batch) -> None:
        self.batch, self.calls = batch, []

    def sample(self, batch_size: int, rng: np.random.Generator, out: Batch | None = None):
        self.calls.append((batch_size, rng, out))
        return self.batch


def test_learn_samples_a_batch_of_batch_size_with_the_rng_and_makes_one_update_on_it():
    learner = hand_set_learner(
        double=True, huber=False, learning_rate=0.1, adam_eps=0.5, batch_size=7
    )
    batch = one_batch(0.9)
    replay, rng = FakeReplay(batch), np.random.default_rng(0)
    learner.learn(replay, 0.5, rng)
    # the first sample has no batch to reuse; the next one is handed the last to refill
    assert replay.calls == [(7, rng, None)]
    # the same first step as test_adams_first_step_...: the sampled batch was trained on
    assert learner.updates == 1
    assert learner.pop_loss() == pytest.approx((3 - 2.8) ** 2, rel=1e-5)
    assert learner.net.q[0, 1].item() == pytest.approx(3 - 0.1 * 0.4 / 0.9, rel=1e-6)
    learner.learn(replay, 0.5, rng)
    assert replay.calls[1] == (7, rng, batch)
    assert learner.updates == 2


def test_a_learner_keeps_its_networks_conv_weights_in_the_default_layout_unless_asked():
    learner = Learner(DQN((4, 10, 10), 3, network="small"), DQNConfig(), torch.device("cpu"))
    assert learner.net.conv[0].weight.is_contiguous()


def test_the_network_and_the_loss_sum_go_to_the_learners_device():
    # torch's "meta" device holds tensors without data: no GPU is needed to see the move
    learner = Learner(Table([[0.0, 1.0]]), DQNConfig(), torch.device("meta"))
    assert learner.net.q.device.type == "meta"
    assert learner.losses._sum.device.type == "meta"


def test_the_loss_meter_sums_on_its_device():
    assert LossMeter(torch.device("meta"))._sum.device.type == "meta"


def test_adam_runs_fused():
    # fused: one kernel over all tensors, faster on a CPU for a small network
    # (benchmarks/sgd_step.py); the same math, so only the option itself can show it
    learner = Learner(Table([[0.0, 1.0]]), DQNConfig(), torch.device("cpu"))
    assert learner.optimizer.param_groups[0]["fused"] is True


class FakeCuda:
    """What ``Learner.to_device`` uses of CUDA, on a CPU: ``pin_memory`` gives a copy (a
    new host buffer), ``.to(device, non_blocking)`` gives a copy and is logged, events are
    logged when recorded and waited for. ``log`` holds the calls in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.log: list[tuple] = []
        fake = self

        class Event:
            def record(self) -> None:
                fake.log.append(("record", id(self)))

            def synchronize(self) -> None:
                fake.log.append(("synchronize", id(self)))

        def pin_memory(tensor: torch.Tensor) -> torch.Tensor:
            fake.log.append(("pin", tuple(tensor.shape)))
            return tensor.clone()

        def to(tensor: torch.Tensor, device: torch.device, non_blocking: bool = False):
            fake.log.append(("copy", str(device), non_blocking, tensor.data_ptr()))
            return tensor.clone()

        monkeypatch.setattr(torch.cuda, "Event", Event)
        monkeypatch.setattr(torch.Tensor, "pin_memory", pin_memory)
        monkeypatch.setattr(torch.Tensor, "to", to)

    def calls(self, kind: str) -> list[tuple]:
        return [c for c in self.log if c[0] == kind]


def cuda_learner() -> Learner:
    """A CPU learner told that its device is CUDA (only ``to_device`` reads it here)."""
    learner = Learner(Table([[0.0, 1.0]]), DQNConfig(), torch.device("cpu"))
    learner.device = torch.device("cuda")
    return learner


def random_batch(seed: int, size: int = 4) -> Batch:
    rng = np.random.default_rng(seed)
    return Batch(
        states=rng.integers(0, 255, (size, 2, 3, 3), dtype=np.uint8),
        next_states=rng.integers(0, 255, (size, 2, 3, 3), dtype=np.uint8),
        actions=rng.integers(0, 2, size),
        returns=rng.random(size).astype(np.float32),
        discounts=rng.random(size).astype(np.float32),
    )


def test_on_cuda_a_batch_goes_through_pinned_buffers_reused_and_copied_without_blocking(
    monkeypatch,
):
    learner = cuda_learner()
    cuda = FakeCuda(monkeypatch)
    first, second = random_batch(0), random_batch(1)
    out = learner.to_device(first)
    for k in TENSORS:  # the values arrive
        assert np.array_equal(out[k].numpy(), getattr(first, k)), k
    # one pinned buffer per array, each copied to the device without blocking, then one
    # event recorded after the copies
    assert [c[1] for c in cuda.calls("pin")] == [getattr(first, k).shape for k in TENSORS]
    copies = cuda.calls("copy")
    assert [(c[1], c[2]) for c in copies] == [("cuda", True)] * len(TENSORS)
    assert cuda.log[-1][0] == "record" and not cuda.calls("synchronize")
    buffers = [c[3] for c in copies]
    event = cuda.log[-1][1]

    cuda.log.clear()
    out = learner.to_device(second)
    for k in TENSORS:  # the second batch's values, not the first's
        assert np.array_equal(out[k].numpy(), getattr(second, k)), k
    # the same shapes: no new pinned buffer; the copies read the same buffers, refilled
    # only after waiting for the previous copies out of them
    assert not cuda.calls("pin")
    assert cuda.log[0] == ("synchronize", event)
    assert [c[3] for c in cuda.calls("copy")] == buffers
    assert cuda.log[-1][0] == "record" and cuda.log[-1][1] != event

    cuda.log.clear()
    learner.to_device(random_batch(2, size=6))  # another batch size: new buffers
    assert len(cuda.calls("pin")) == len(TENSORS)


def test_on_a_cpu_a_batch_is_handed_over_without_a_copy():
    learner = Learner(Table([[0.0, 1.0]]), DQNConfig(), torch.device("cpu"))
    batch = random_batch(0)
    out = learner.to_device(batch)
    for k in TENSORS:  # views of the sampled arrays: no copy, no pinned buffer
        assert np.shares_memory(out[k].numpy(), getattr(batch, k)), k


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_autocast_asks_for_bf16_on_every_device(monkeypatch, device):
    # CUDA's autocast defaults to fp16, which would need a loss scaler the learner does
    # not have; on a CPU the default is bf16 already, so only the argument can show it.
    learner = Learner(Table([[0.0, 3.0], [1.0, 5.0], [4.0, 2.0]]), DQNConfig(), torch.device("cpu"))
    learner.device = torch.device(device)
    asked = record_autocast(monkeypatch)
    learner.loss(two_transitions())
    assert asked == [(device, torch.bfloat16)]
