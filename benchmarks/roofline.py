"""Where one PQN update's time goes, against what this CPU can do: the CPU's own measured
matmul throughput (fp32 and bf16) and copy bandwidth, then one update of pong-fast's
network (``small`` + LayerNorm, 42x42 frames, minibatch 256, channels-last; ``--network
nature`` atari-84's on 84x84) profiled by operator with torch.profiler, in fp32 and
under bf16 autocast (on a CPU without bf16 units, where torch emulates it, bf16 is only
timed), and one forward pass to act. Each part's arithmetic is counted from
the layers' shapes (a conv's backward is two convs' work: the gradients of its input and
of its weights; the first conv has no input gradient), so the table says how far each
part runs from the matmul ceiling; parts with no arithmetic to speak of (LayerNorm, the
optimizer, copies) are bound by memory traffic and overheads instead.

    uv run benchmarks/roofline.py                  # all the cores this process may use
    taskset -c 0 uv run benchmarks/roofline.py     # one core, as one lane of seeds.py
    uv run benchmarks/roofline.py --levers         # what the profile points to, timed
    uv run benchmarks/roofline.py --eval-beside    # the learner beside an evaluation
    uv run benchmarks/roofline.py --network nature --act 128   # atari-84's update and acting

``--levers`` times today's update against the same compiled (run.compile), in-place ReLUs,
RAdam through torch's fused Adam kernel (pqn.fused_optimizer), NCHW weights and
frames, and the frames scaled in fp32 as the network once did, interleaved, in fp32 and
(on a CPU with bf16 units) under bf16 autocast.
``--eval-beside`` runs the learner alone, then beside a thread playing greedy games as
pong-fast's evaluation does (10 games side by side, one batched forward pass a step), at
the process's threads, at one thread while the games play, and with the games' thread at
the lowest priority (nice 19), and says the games' agent steps a second in each.

Run it on an otherwise idle machine: every figure is a median of ``--reps`` windows.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import threading
import time
import types
from collections import defaultdict
from collections.abc import Callable

import numpy as np
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from atari_speed.agent.networks import DQN, _fp32_out
from atari_speed.agent.pqn import QLambdaLearner
from atari_speed.app.auto import cpu_info
from atari_speed.core.config import DQNConfig, PQNConfig

ACTIONS, MINIBATCH = 6, 256
# each network's frames: pong-fast's `small` on 42x42, atari-84's `nature` (and `nips`) on 84x84
SHAPES = {"small": (4, 42, 42), "nips": (4, 84, 84), "nature": (4, 84, 84)}

# The part each aten op belongs to, by exact name; an op inside the optimizer's step is
# "optimizer" whatever its name, and an op named nowhere here is "other".
OPS: dict[str, tuple[str, ...]] = {
    "conv backward": ("aten::convolution_backward",),
    "conv forward": ("aten::convolution", "aten::_convolution", "aten::mkldnn_convolution"),
    "linear (forward and backward)": ("aten::mm", "aten::addmm", "aten::t", "aten::linear"),
    "LayerNorm (GroupNorm of 1 group on convs)": (
        "aten::native_layer_norm",
        "aten::native_layer_norm_backward",
        "aten::native_group_norm",
        "aten::native_group_norm_backward",
    ),
    "ReLU (forward and backward)": ("aten::relu", "aten::clamp_min", "aten::threshold_backward"),
    "gradient clip": (
        "aten::linalg_vector_norm",
        "aten::stack",
        "aten::_foreach_norm",
        "aten::_foreach_mul_",  # outside the optimizer's step: the clip's scaling
        "aten::clamp",
    ),
    "loss and gather": (
        "aten::mse_loss",
        "aten::mse_loss_backward",
        "aten::gather",
        "aten::gather_backward",
        "aten::scatter_add_",
    ),
    "uint8 to float, casts, copies": ("aten::copy_", "aten::_to_copy", "aten::to", "aten::div"),
}
PART_OF = {op: part for part, ops in OPS.items() for op in ops}
OPTIMIZER = "optimizer (RAdam)"


def seconds_per_call(fn: Callable[[], object], calls: int, reps: int) -> float:
    """Median over ``reps`` windows of ``calls`` calls, after one warm-up window."""
    for _ in range(calls):
        fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def matmul_gflops(dtype: torch.dtype, n: int, reps: int) -> float:
    """This CPU's throughput on an n x n x n matmul in ``dtype``: the ceiling."""
    a = torch.randn(n, n).to(dtype)
    b = torch.randn(n, n).to(dtype)
    out = torch.empty(n, n, dtype=dtype)
    sec = seconds_per_call(lambda: torch.mm(a, b, out=out), 3, reps)
    return 2 * n**3 / sec / 1e9


def copy_gbytes(megabytes: int, reps: int) -> float:
    """Read plus write bandwidth of a large tensor copy, GB/s."""
    src = torch.ones(megabytes * 2**20 // 4)
    dst = torch.empty_like(src)
    sec = seconds_per_call(lambda: dst.copy_(src), 3, reps)
    return 2 * src.numel() * 4 / sec / 1e9


def layer_flops(net: DQN, batch: int, network: str = "small") -> dict[str, float]:
    """Multiply-adds x 2 of one update's forward and backward passes, by part, from each
    conv's and linear layer's output shape (one forward of ``batch`` frames)."""
    flops: dict[str, float] = defaultdict(float)
    first_conv = True
    hooks = []

    def conv_hook(module: nn.Conv2d, _inp: object, out: torch.Tensor) -> None:
        nonlocal first_conv
        kh, kw = module.kernel_size
        fwd = 2.0 * out.numel() * module.in_channels * kh * kw / module.groups
        flops["conv forward"] += fwd
        # weight gradient always; input gradient except for the first conv (its input is data)
        flops["conv backward"] += fwd * (1 if first_conv else 2)
        first_conv = False

    def linear_hook(module: nn.Linear, _inp: object, out: torch.Tensor) -> None:
        fwd = 2.0 * out.numel() * module.in_features
        flops["linear (forward and backward)"] += 3 * fwd

    for module in net.modules():
        if isinstance(module, nn.Conv2d):
            hooks.append(module.register_forward_hook(conv_hook))
        elif isinstance(module, nn.Linear):
            hooks.append(module.register_forward_hook(linear_hook))
    with torch.no_grad():
        net(torch.zeros(batch, *SHAPES[network], dtype=torch.uint8))
    for hook in hooks:
        hook.remove()
    return dict(flops)


def learner(
    bf16: bool, network: str = "small", compile: bool = False, fused: bool = False
) -> QLambdaLearner:
    torch.manual_seed(0)
    cfg = DQNConfig(algorithm="pqn", network=network, layer_norm=True, learning_rate=2.5e-4)
    net = DQN(SHAPES[network], ACTIONS, network=network, layer_norm=True)
    return QLambdaLearner(
        net,
        cfg,
        PQNConfig(max_grad_norm=10.0, fused_optimizer=fused),
        torch.device("cpu"),
        bf16=bf16,
        channels_last=True,
        compile=compile,
    )


def part_of(event: object) -> str:
    """The part of a profiled op: the optimizer's if it ran inside its step or zero_grad,
    else by its name."""
    parent = event
    while parent is not None:
        if parent.name.startswith("Optimizer."):
            return OPTIMIZER
        parent = parent.cpu_parent
    return PART_OF.get(event.name, "other")


def profile_update(
    bf16: bool, updates: int, network: str = "small"
) -> tuple[float, dict[str, float]]:
    """Wall milliseconds of one update (median, profiler off) and self-CPU milliseconds
    of each part per update (profiler on; its overhead inflates small ops a little)."""
    pqn = learner(bf16, network)
    obs, actions, returns = minibatch(network)
    wall = seconds_per_call(lambda: pqn.step(obs, actions, returns), updates, 5) * 1e3
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(updates):
            pqn.step(obs, actions, returns)
    parts: dict[str, float] = defaultdict(float)
    for event in prof.events():
        parts[part_of(event)] += event.self_cpu_time_total / 1e3 / updates
    return wall, dict(parts)


def act_ms(network: str, envs: int, reps: int, bf16: bool = False) -> float:
    """Median milliseconds of one no-grad forward pass over ``envs`` frames, as a run picks
    its envs' actions: fp32, or under bf16 autocast (the learner's, output layer in fp32)."""
    pqn = learner(bf16, network)
    net = pqn.net.eval()
    obs = frames(network, envs, np.random.default_rng(0))
    with torch.no_grad(), pqn.autocast():
        return seconds_per_call(lambda: net(obs), 20, reps) * 1e3


def frames(network: str, n: int, rng: np.random.Generator) -> torch.Tensor:
    """``n`` random uint8 frame stacks of ``network``'s input shape, NCHW."""
    return torch.from_numpy(rng.integers(0, 255, (n, *SHAPES[network]), dtype=np.uint8))


def minibatch(network: str = "small") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A fixed minibatch: frames (channels-last), actions, returns."""
    rng = np.random.default_rng(0)
    obs = frames(network, MINIBATCH, rng)
    actions = torch.from_numpy(rng.integers(0, ACTIONS, MINIBATCH))
    returns = torch.from_numpy(rng.normal(size=MINIBATCH).astype(np.float32))
    return obs.contiguous(memory_format=torch.channels_last), actions, returns


def levers(reps: int, updates: int, network: str = "small", bf16: bool = False) -> None:
    """Today's update (fp32, or under bf16 autocast) against the changes the profile points
    to, interleaved."""
    obs, actions, returns = minibatch(network)
    precision = "bf16 autocast" if bf16 else "fp32"
    rows: dict[str, tuple[QLambdaLearner, torch.Tensor]] = {
        f"today's ({precision}, channels-last)": (learner(bf16, network), obs)
    }
    compiled = learner(bf16, network, compile=True)  # run.compile: the updates compiled
    start = time.perf_counter()
    compiled.step(obs, actions, returns)
    compile_s = time.perf_counter() - start
    rows[f"torch.compile of the network ({compile_s:.0f} s to compile)"] = (compiled, obs)
    in_place = learner(bf16, network)
    for module in in_place.net.modules():
        if isinstance(module, nn.ReLU):
            module.inplace = True
    rows["ReLU in place"] = (in_place, obs)
    rows["RAdam through the fused Adam kernel (pqn.fused_optimizer)"] = (
        learner(bf16, network, fused=True),
        obs,
    )
    nchw = learner(bf16, network)
    nchw.net.to(memory_format=torch.contiguous_format)
    rows["weights and frames NCHW"] = (nchw, obs.contiguous())
    fp32_frames = learner(bf16, network)
    fp32_frames.net.forward = types.MethodType(forward_fp32_frames, fp32_frames.net)
    rows["frames scaled in fp32, then cast by autocast (the network before)"] = (
        fp32_frames,
        obs,
    )
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(reps):
        for name, (pqn, frames) in rows.items():
            call = lambda pqn=pqn, frames=frames: pqn.step(frames, actions, returns)  # noqa: E731
            times[name].append(seconds_per_call(call, updates, 1) * 1e3)
    first = statistics.median(next(iter(times.values())))
    print("\n| change | ms per update | against today's |\n|---|---:|---:|")
    for name, values in times.items():
        ms = statistics.median(values)
        print(f"| {name} | {ms:.1f} | {first / ms:.2f}x |")


def forward_fp32_frames(net: DQN, x: torch.Tensor) -> torch.Tensor:
    """``DQN.forward`` (no dueling) as it was before the frames reached the first conv in
    autocast's dtype: scaled in fp32, then cast again by autocast at the first conv."""
    x = x.contiguous(memory_format=torch.channels_last)
    return _fp32_out(net.head, net.conv(x.float() / 255.0))


def eval_beside(threads: int, seconds: float) -> None:
    """Learner updates a second and evaluation steps a second, alone and together."""
    from atari_speed.envs.pipeline import make_env
    from atari_speed.run.evaluation import play_side_by_side

    obs, actions, returns = minibatch()
    pqn = learner(False)
    snapshot = learner(False).net.eval()
    played = [0]
    forward = snapshot.forward

    def counting(x: torch.Tensor) -> torch.Tensor:
        played[0] += len(x)
        return forward(x)

    snapshot.forward = counting

    def play(stop: threading.Event, nice: bool) -> None:
        if nice:  # this thread and the torch threads it starts: Linux's nice is per thread
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        envs = [make_env("small", "pong", seed=i) for i in range(10)]
        while not stop.is_set():
            play_side_by_side(
                envs, snapshot, torch.device("cpu"), 0.05, np.random.default_rng(0), stop
            )
        for env in envs:
            env.close()

    # (name, games played, their thread at nice 19, learner's threads, threads meanwhile)
    conditions = (
        ("learner alone", False, False, threads, threads),
        ("games alone", True, False, None, threads),
        ("games alone, one thread", True, False, None, 1),
        ("learner beside the games", True, False, threads, threads),
        ("learner beside the games, one thread while they play", True, False, threads, 1),
        ("learner beside the games at the lowest priority", True, True, threads, threads),
    )
    print(f"\n| {threads} thread(s) | ms per update | games' agent steps a second |")
    print("|---|---:|---:|")
    for name, games, nice, learning, during in conditions:
        torch.set_num_threads(during)
        stop = threading.Event()
        player = threading.Thread(target=play, args=(stop, nice)) if games else None
        if player:
            player.start()
            time.sleep(2.0)  # the envs made and the games under way
        before, start, done = played[0], time.perf_counter(), 0
        while time.perf_counter() - start < seconds:
            if learning:
                pqn.step(obs, actions, returns)
                done += 1
            else:
                time.sleep(0.05)
        elapsed = time.perf_counter() - start
        stop.set()
        if player:
            player.join(timeout=60)
        torch.set_num_threads(threads)
        ms = f"{elapsed / done * 1e3:.1f}" if done else ""
        rate = f"{(played[0] - before) / elapsed:,.0f}" if games else ""
        print(f"| {name} | {ms} | {rate} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=5, help="timing windows per figure")
    parser.add_argument("--updates", type=int, default=20, help="updates per window")
    parser.add_argument("--matmul", type=int, default=1024, help="n of the n x n x n matmul")
    parser.add_argument("--levers", action="store_true", help="time the changes (see above)")
    parser.add_argument("--eval-beside", action="store_true", help="the learner beside games")
    parser.add_argument(
        "--network",
        choices=sorted(SHAPES),
        default="small",
        help="small: pong-fast's (42x42); nature: atari-84's (84x84); nips (84x84)",
    )
    parser.add_argument(
        "--act", type=int, default=64, help="envs of the acting forward pass (atari-84: 128)"
    )
    args = parser.parse_args()
    if args.eval_beside and args.network != "small":
        parser.error("--eval-beside plays pong-fast's games: its network is small")
    threads = len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    model, bf16_units = cpu_info()
    if args.levers or args.eval_beside:
        print(f"{model or 'CPU'}, {threads} thread(s), torch {torch.__version__}")
        if args.levers:
            levers(args.reps, args.updates, args.network)
            if bf16_units:  # the levers under bf16 autocast too
                levers(args.reps, args.updates, args.network, bf16=True)
        if args.eval_beside:
            eval_beside(threads, seconds=4.0)
        return
    peak = {
        "fp32": matmul_gflops(torch.float32, args.matmul, args.reps),
        "bf16": matmul_gflops(torch.bfloat16, args.matmul, args.reps),
    }
    bandwidth = copy_gbytes(256, args.reps)
    print(
        f"{model or 'CPU'} (bf16 units: {', '.join(bf16_units) or 'none'}), {threads} thread(s), "
        f"torch {torch.__version__}"
    )
    print(
        f"\nceilings: matmul {args.matmul}^3 fp32 {peak['fp32']:,.0f} GFLOP/s, "
        f"bf16 {peak['bf16']:,.0f} GFLOP/s ({peak['bf16'] / peak['fp32']:.2f}x); "
        f"copy {bandwidth:,.1f} GB/s (read + write)"
    )
    network = args.network
    flops = layer_flops(
        DQN(SHAPES[network], ACTIONS, network=network, layer_norm=True), MINIBATCH, network
    )
    acting = act_ms(network, args.act, args.reps)
    act_flops = flops["conv forward"] + flops["linear (forward and backward)"] / 3
    act_flops *= args.act / MINIBATCH
    print(
        f"\nacting: one fp32 forward pass of {args.act} envs' frames (no gradient, "
        f"channels-last) {acting:.1f} ms, {act_flops / acting / 1e6:,.0f} GFLOP/s "
        f"({act_flops / acting / 1e6 / peak['fp32']:.0%} of the fp32 matmul ceiling)"
    )
    if bf16_units:
        acting_bf16 = act_ms(network, args.act, args.reps, bf16=True)
        print(
            f"acting under bf16 autocast: {acting_bf16:.1f} ms, {acting / acting_bf16:.2f}x "
            f"fp32's speed ({act_flops / acting_bf16 / 1e6 / peak['bf16']:.0%} of the bf16 "
            "matmul ceiling)"
        )
    total_flops = sum(flops.values())
    fp32_ms = math.nan
    for precision in ("fp32", "bf16"):
        if precision == "bf16" and not bf16_units:
            # Emulated bf16: the profiler files its convolutions under other names, and a
            # ceiling of ~1 GFLOP/s puts every part "above" it; the update's time is the fact.
            pqn, batch = learner(True, network), minibatch(network)
            # an emulated update takes ~0.5 s: 3 windows of 2 tell its order of magnitude
            ms = seconds_per_call(lambda: pqn.step(*batch), 2, 3) * 1e3  # noqa: B023 (called here)
            print(
                f"\n### one update, bf16: {ms:.1f} ms (profiler off), {ms / fp32_ms:.1f}x the "
                "fp32 update's time: this CPU has no bf16 units, so torch emulates bf16 (the "
                f'matmul above: {peak["bf16"]:,.0f} GFLOP/s) and run.precision = "auto" '
                "times it slower and takes fp32; no table by part (their ceilings mean nothing)"
            )
            continue
        wall, parts = profile_update(precision == "bf16", args.updates, network)
        fp32_ms = wall if precision == "fp32" else fp32_ms
        profiled = sum(parts.values())
        floor = total_flops / (peak[precision] * 1e9) * 1e3
        print(
            f"\n### one update, {precision}: {wall:.1f} ms (profiler off); its "
            f"{total_flops / 1e9:.2f} GFLOP at the matmul ceiling would take {floor:.1f} ms "
            f"({floor / wall:.0%} of the update)\n"
        )
        print(
            "| part | ms per update | share | GFLOP | GFLOP/s "
            f"| of the {precision} matmul ceiling |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for part, ms in sorted(parts.items(), key=lambda kv: -kv[1]):
            work = flops.get(part)
            rate = f"{work / ms / 1e6:,.0f}" if work and ms > 0 else ""
            share_of_peak = f"{work / ms / 1e6 / peak[precision]:.0%}" if work and ms > 0 else ""
            gflop = f"{work / 1e9:.3f}" if work else ""
            print(
                f"| {part} | {ms:.2f} | {ms / profiled:.0%} | {gflop} | {rate} | {share_of_peak} |"
            )
        print(f"| **all (profiled self time)** | {profiled:.2f} | 100% | | | |")


if __name__ == "__main__":
    main()
