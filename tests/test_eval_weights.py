"""benchmarks/eval_weights.py: the three rules of what evaluations play, on a kept run."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("eval_weights", ROOT / "benchmarks/eval_weights.py")
eval_weights = importlib.util.module_from_spec(spec)
spec.loader.exec_module(eval_weights)


def fake_run(run: Path, means: dict[int, tuple[float, float]], smoothed: dict[int, float]):
    """A run directory with its evaluations at the agent steps of ``means`` (the weights'
    and the average's greedy means there, already played: snapshots/starts.json), the
    training score's smoothed value at steps of ``smoothed``, solved at 1,000; the last
    evaluation is eval.at_end's."""
    (run / "snapshots").mkdir(parents=True)
    steps = sorted(means)
    evaluations = [{"steps": s, "reward": means[s][1]} for s in steps]
    evaluations[-1]["final"] = True
    summary = {
        "preset": {"run": {"stop_reward": 18.0}, "eval": {"max_frames": 0}},
        "solved": True,
        "solved_at_steps": 1_000,
        "evaluations": evaluations,
    }
    (run / "summary.json").write_text(json.dumps(summary))
    rows = ["seconds,steps,score,smoothed"] + [f"1,{s},0,{m}" for s, m in smoothed.items()]
    (run / "scores.csv").write_text("\n".join(rows) + "\n")
    played = {f"{s}.pt": w for s, (w, _) in means.items()}
    played |= {f"{s}-average.pt": a for s, (_, a) in means.items()}
    (run / "snapshots" / "starts.json").write_text(json.dumps(played))
    return run


def test_each_rule_reads_its_own_weights_and_the_switch_follows_the_smoothed_score(tmp_path):
    # at 400 the smoothed score is 2 (the weights are played under the switch), at 600
    # and 1,000 it is 16 and 18 (the average); 1,000 is the final evaluation
    means = {400: (19.0, 10.0), 500: (19.5, 19.0), 600: (12.0, 19.5), 1_000: (19.0, 20.0)}
    run = fake_run(tmp_path / "s0", means, {300: 2.0, 550: 16.0, 990: 18.0})
    result = eval_weights.rules(run, average_from=15.0)
    assert [p[1] for p in result["points"]] == [2.0, 2.0, 16.0, 18.0]
    assert result["weights"] == {"first": 400, "low": 12.0, "gap": 600}
    assert result["average"] == {"first": 500, "low": 19.0, "gap": 500}
    # the switch: the weights at 400 and 500 (below 15), the average at 600 and 1,000
    assert result["switched"] == {"first": 400, "low": 19.0, "gap": 600}
    # from -1000 the switch is the average throughout, before any game has ended too
    assert eval_weights.rules(run, average_from=-1000.0)["switched"] == result["average"]
    early = fake_run(tmp_path / "s1", {400: (19.0, 10.0), 1_000: (19.0, 20.0)}, {500: 2.0})
    assert eval_weights.rules(early, average_from=-1000.0)["switched"]["first"] is None
    assert eval_weights.rules(early, average_from=15.0)["switched"]["first"] == 400


def test_a_final_evaluation_is_no_greedy_solve_and_a_run_without_snapshots_is_named(tmp_path):
    means = {400: (10.0, 10.0), 1_000: (19.0, 19.0)}
    run = fake_run(tmp_path / "s0", means, {300: 2.0})
    assert eval_weights.rules(run, 15.0)["average"] == {"first": None, "low": None, "gap": None}
    (run / "snapshots" / "starts.json").write_text(json.dumps({"400.pt": 10.0}))
    with pytest.raises(eval_weights.ConfigError, match=r"eval\.snapshots = true"):
        eval_weights.rules(run, 15.0)
