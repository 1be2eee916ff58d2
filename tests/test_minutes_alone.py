"""benchmarks/minutes_alone.py: a run's minutes alone from its agent steps and SGD updates."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
from torch.utils.tensorboard import SummaryWriter

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("minutes_alone", ROOT / "benchmarks/minutes_alone.py")
minutes_alone = importlib.util.module_from_spec(spec)
spec.loader.exec_module(minutes_alone)


def test_two_fps_figures_fix_the_acting_and_the_update_cost():
    # a rollout of 2048 steps: 1.0 s acting + 50 ms an update -> 32 updates 2.6 s, 8 1.4 s
    acting, update = minutes_alone.rollout_cost([(32, 2048 / 2.6), (8, 2048 / 1.4)], 2048)
    assert acting == pytest.approx(1.0) and update == pytest.approx(0.05)
    with pytest.raises(ValueError, match="two different"):
        minutes_alone.rollout_cost([(32, 800.0), (32, 900.0)], 2048)
    with pytest.raises(ValueError, match="--fps 'x:1'"):
        minutes_alone.parse_fps("x:1")


def fake_run(
    path: Path,
    reached: dict[str, int],
    updates: list[tuple[int, int]],
    evaluations: list[dict] = (),
) -> Path:
    path.mkdir(parents=True)
    summary = {
        "reached": {k: {"steps": v, "seconds": 0.0} for k, v in reached.items()},
        "preset": {"run": {"envs": 64}, "pqn": {"rollout": 32}},
        "evaluations": list(evaluations),
    }
    (path / "summary.json").write_text(json.dumps(summary))
    with SummaryWriter(str(path)) as writer:
        for step, count in updates:
            writer.add_scalar("train/sgd_updates", count, step)
    return path


def test_a_runs_minutes_count_the_updates_it_made_by_each_level(tmp_path):
    # 64 updates a rollout to 204,800 steps (100 rollouts), then 8 a rollout
    logged = [(20_480 * i, 640 * i) for i in range(11)] + [(204_800 + 20_480, 6_400 + 80)]
    run = fake_run(tmp_path / "set" / "s0", {"-15": 102_400, "0": 204_800}, logged)
    cost = {2048: (1.0, 0.05)}
    minutes = minutes_alone.run_minutes(run, cost)
    assert minutes["-15"] == pytest.approx((50 * 1.0 + 3_200 * 0.05) / 60)
    assert minutes["0"] == pytest.approx((100 * 1.0 + 6_400 * 0.05) / 60)
    assert math.isinf(minutes["18"])
    # the same steps with a quarter of the updates cost less: the phase's updates count
    cheap = fake_run(tmp_path / "set" / "s1", {"0": 204_800}, [(204_800, 1_600)])
    assert minutes_alone.run_minutes(cheap, cost)["0"] == pytest.approx((100 + 80) / 60)
    text = minutes_alone.table([(run, minutes), (cheap, minutes_alone.run_minutes(cheap, cost))])
    assert "not reached" in text.splitlines()[-1]  # the set's worst: s0 never reached 18
    with pytest.raises(ValueError, match="no --fps"):
        minutes_alone.run_minutes(run, {4096: (1.0, 0.05)})


def test_eval_share_counts_the_evaluations_its_budget_would_have_started(tmp_path):
    # one update a rollout of 2048 steps at 1.0 s acting + 1.0 s an update: 2 s a rollout;
    # evaluations recorded at 20,480 steps (20 s of training) and every 20,480 after, 2 CPU
    # s each, and the final one (never counted)
    logged = [(20_480 * i, 10 * i) for i in range(11)]
    evals = [{"steps": 20_480 * i, "cpu_seconds": 2.0} for i in range(1, 10)]
    evals.append({"steps": 204_800, "cpu_seconds": 50.0, "final": True})
    run = fake_run(tmp_path / "s0", {"0": 204_800}, logged, evals)
    cost = {2048: (1.0, 1.0)}
    alone = minutes_alone.run_minutes(run, cost)["0"]
    assert alone == pytest.approx(200 / 60)
    assert minutes_alone.run_minutes(run, cost, 1.0)["0"] == pytest.approx((200 + 18) / 60)
    # at 5%: the first on a clock of 20 s; the next when 2 + 2 <= 0.05 x (clock - 20),
    # each clock the training's 20 s a recorded one plus the games chosen before: the 5th
    # (100 + 2 = 102 s), then 6 <= 0.05 x (144 - 20) for the 7th, 8 <= 0.05 x (186 - 20) for
    # the 9th: four of nine
    assert minutes_alone.run_minutes(run, cost, 0.05)["0"] * 60 == pytest.approx(200 + 4 * 2)
    solved = fake_run(tmp_path / "s1", {"0": 1, "18": 204_800}, logged, evals)
    at_18 = minutes_alone.run_minutes(solved, cost, 0.05)
    # 8 CPU s of games over the 208 - 20 s from the first one's start to the solve
    assert at_18["evaluations"] == 4 and at_18["eval share"] == pytest.approx(8 / 188)
    assert "| 4 | 4.3% |" in minutes_alone.table([(solved, at_18)])
    # at 10% all but the 2nd (4 > 0.1 x (42 - 20))
    assert minutes_alone.run_minutes(run, cost, 0.1)["0"] * 60 == pytest.approx(200 + 8 * 2)
