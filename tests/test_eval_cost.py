"""benchmarks/eval_cost.py: the ale-backend games it times are whole games, one per env."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import torch

from atari_speed.envs.pipeline import resolve_pipeline

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("eval_cost", ROOT / "benchmarks/eval_cost.py")
eval_cost = importlib.util.module_from_spec(spec)
spec.loader.exec_module(eval_cost)


class AlwaysNoop(torch.nn.Module):
    """Q-values that make NOOP greedy: Pong's opponent then wins every point."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = torch.zeros(len(x), 6)
        q[:, 0] = 1.0
        return q


def test_ale_games_are_whole_games_one_per_env():
    ckpt = SimpleNamespace(pipeline=resolve_pipeline("small"), game="pong")
    scores = eval_cost.play_on_ale(ckpt, AlwaysNoop(), episodes=2, seed=0)
    # an agent that never moves loses 0-21: a whole game's score (not a step's or a
    # point's), one per env
    assert scores == [-21.0, -21.0]


def test_as_run_plays_the_games_the_runs_own_evaluation_of_those_weights_plays():
    # the final evaluation of a run from before eval.at_end, rebuilt from its checkpoint:
    # the same seeds, epsilon and frames cap give the same games as Evaluation's
    from atari_speed.agent.networks import build_network
    from atari_speed.core.config import load_preset
    from atari_speed.run.evaluation import Evaluation
    from atari_speed.run.plan import make_plan

    overrides = ["run.mode='n-env'", "run.envs=1", "run.precision='fp32'"]
    overrides += ["env.backend='sync'", "run.device='cpu'", "run.seed=7"]
    overrides += ["eval.episodes=2", "eval.epsilon=0.3", "eval.max_frames=2000"]
    torch.manual_seed(0)
    for every_start in (False, True):  # drawn games; one game from every start
        more = [f"eval.every_start={str(every_start).lower()}"]
        if every_start:
            more += ["eval.epsilon=0.0", "eval.max_frames=400"]  # an untrained net's rallies
        plan = make_plan(load_preset("pong-fast", overrides + more))
        net = build_network(plan.preset.dqn, plan.obs_shape, plan.actions).eval()
        evaluation = Evaluation(plan, net.state_dict(), frames=1234)
        evaluation.wait()
        ckpt = SimpleNamespace(
            pipeline=plan.pipeline, game="pong", frames=1234, preset=plan.preset.to_dict()
        )
        scores, mean = eval_cost.play_as_run(ckpt, net, episodes=2)
        assert (scores, mean) == (evaluation.scores, evaluation.mean)
        assert len(scores) == (29 if every_start else 2)


def test_the_lost_games_and_the_lowest_score_are_said():
    assert eval_cost.lost_line([20.0, -21.0, 19.0, -3.0]) == "2 lost, lowest -21"
    assert eval_cost.lost_line([20.0, 0.0]) == "0 lost, lowest +0"


def test_the_forward_timer_counts_the_passes_and_their_observations_then_starts_anew():
    net = AlwaysNoop()
    timer = eval_cost.ForwardTimer(net)
    for batch in (4, 2, 3):
        net(torch.zeros(batch, 4, 42, 42))
    assert (timer.passes, timer.observations) == (3, 9)
    assert "3 forward passes (mean batch 3.00)" in timer.line(evaluation_cpu=1.0)
    assert (timer.passes, timer.observations, timer.cpu_seconds) == (0, 0, 0.0)
    timer.close()  # the hooks go with it: a pass after counts nowhere
    net(torch.zeros(1, 4, 42, 42))
    assert timer.passes == 0
