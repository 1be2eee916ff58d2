"""The seed benchmark's figures: per seed, then the median and the worst over seeds."""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from atari_speed.agent.networks import DQN
from atari_speed.app import seeds as seeds_module
from atari_speed.app.seeds import (
    STARTS_FILE,
    finished,
    lane_cores,
    lock_log,
    median,
    midranks,
    parse_seeds,
    rank_sum_p,
    read_result,
    report,
    score_starts,
    table,
)
from atari_speed.core.errors import ConfigError
from atari_speed.envs.pipeline import resolve_pipeline
from atari_speed.run.checkpoint import Checkpoint, save_checkpoint
from atari_speed.run.tracking import games_to_reach
from tests.scripts import ROOT


def fake_run(
    path,
    seed,
    reached,
    frames,
    solved,
    fps=1000.0,
    greedy=None,
    play=None,
    evaluations=(),
    old=False,
    eval_share=None,
    budget=1_500_000,
    final=None,
    resumed_at=None,
):
    """A run directory; ``old``: its summary.json as earlier versions wrote it, saying
    frames (run.frames, solved_at_frames, ...) for agent steps."""
    path.mkdir(parents=True)
    steps = "frames" if old else "steps"
    summary = {
        steps: frames,
        "seconds": frames / fps,
        "fps": fps,
        "fps_after_warmup": fps,
        "solved": solved,
        "best_avg_reward": 18.2 if solved else 5.0,
        f"eval_solved_at_{steps}": greedy,
        "evaluations": [{steps: f, "reward": r} for f, r in evaluations],
        "reached": {k: {steps: f, "seconds": f / fps} for k, f in reached.items()},
        "preset": {"run": {"stop_reward": 18.0, steps: budget, "seconds": 0.0}},
    }
    if eval_share is not None:
        summary["eval_cpu_share"] = eval_share
    if resumed_at is not None:
        summary["resumed_at_steps"] = resumed_at
    if final is not None:  # eval.at_end's evaluation of the final weights
        summary["evaluations"].append({steps: frames, "reward": final, "final": True})
    (path / "summary.json").write_text(json.dumps(summary))
    (path / "scores.csv").write_text(f"seconds,{steps},score,smoothed\n1,1000,-21,-21\n")
    if play is not None:
        (path / "play.json").write_text(json.dumps({"mean": play}))
    return path


def test_seeds_are_given_as_ranges_or_lists():
    assert parse_seeds("0-2") == [0, 1, 2]
    assert parse_seeds("0,2,5") == [0, 2, 5]
    assert parse_seeds("0-2,7") == [0, 1, 2, 7]
    with pytest.raises(ValueError):
        parse_seeds("a-b")


def test_median_counts_unsolved_as_the_largest():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    assert median([1.0, math.inf, 2.0]) == 2.0
    assert median([1.0, math.inf]) == math.inf
    assert math.isnan(median([]))


def test_table_reports_each_seed_then_median_and_worst(tmp_path):
    full = {"-15": 500_000, "0": 800_000}
    fake_run(tmp_path / "s0", 0, {**full, "18": 1_000_000}, 1_000_000, True, play=19.0)
    fake_run(tmp_path / "s1", 1, {**full, "18": 1_400_000}, 1_400_000, True, greedy=1_200_000)
    fake_run(tmp_path / "s2", 2, full, 1_500_000, False, play=12.0)
    text, results = report([0, 1, 2], tmp_path, "pong-fast")
    assert [r.solve_frames for r in results] == [1_000_000, 1_400_000, math.inf]
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if "|" in line}
    assert "not by 1.50M" in rows["2"] and "1.20M" in rows["1"]
    median_cells = [c.strip() for c in rows["**median**"].split("|")]
    worst_cells = [c.strip() for c in rows["**worst**"].split("|")]
    # frames to -15, 0, 18: median of (0.5, 0.5, 0.5), ..., (1.0, 1.4, unsolved)
    assert median_cells[2:5] == ["0.50M", "0.80M", "1.40M"]
    assert worst_cells[2:5] == ["0.50M", "0.80M", "not solved"]
    # minutes at each run's FPS (1000): 1.4M frames = 23.3 minutes
    assert median_cells[7] == "23.3"
    assert worst_cells[-4] == "12.0" and median_cells[-4] == "15.5"  # play.py
    assert "2 of 3 seeds solved" in text
    assert (tmp_path / "seeds.png").is_file()
    assert json.loads((tmp_path / "seeds.json").read_text())["seeds"][2]["solved"] is False


OLD_AND_NEW = pytest.mark.parametrize("old", [False, True], ids=["steps", "earlier frames"])


@OLD_AND_NEW
def test_stability_columns_say_whether_the_greedy_agent_stayed_solved(tmp_path, old):
    evals = [(600_000, 10.0), (700_000, 19.0), (800_000, 12.5), (900_000, 20.0)]
    reached = {"-15": 500_000, "0": 600_000, "18": 1_000_000}
    both = {"evaluations": evals, "old": old}
    fake_run(tmp_path / "s0", 0, reached, 1_000_000, True, greedy=700_000, **both)
    fake_run(tmp_path / "s1", 1, reached, 1_000_000, True, greedy=900_000, **both)
    fake_run(tmp_path / "s2", 2, {"0": 600_000}, 1_200_000, False, greedy=800_000, **both)
    results = [read_result(s, tmp_path / f"s{s}") for s in range(3)]
    assert [r.frames for r in results] == [1_000_000, 1_000_000, 1_200_000]
    assert results[0].to_frames == reached and results[2].greedy_frames == 800_000
    # the low counts from the greedy solve on, not the evaluations before it
    assert [r.greedy_low for r in results] == [12.5, 20.0, 12.5]
    rows = {line.split("|")[1].strip(): line for line in table(results).splitlines() if "|" in line}
    cells = {k: [c.strip() for c in v.split("|")] for k, v in rows.items()}
    assert [cells["0"][i] for i in (9, 12)] == ["+12.5", "0.30M"]
    assert [cells["1"][i] for i in (9, 12)] == ["+20.0", "0.10M"]
    assert [cells["2"][i] for i in (9, 12)] == ["+12.5", "not by 0.40M"]  # training did not
    assert [cells["**worst**"][i] for i in (9, 12)] == ["+12.5", "not solved"]
    assert [cells["**median**"][i] for i in (9, 12)] == ["+12.5", "0.30M"]


def test_the_final_weights_have_a_column_whose_worst_is_the_lowest(tmp_path):
    reached = {"18": 1_000_000}
    evals = [(700_000, 19.0)]
    for seed, final in ((0, 20.4), (1, 3.6), (2, None)):
        fake_run(
            tmp_path / f"s{seed}", seed, reached, 1_000_000, True, greedy=700_000,
            evaluations=evals, final=final,
        )  # fmt: skip
    results = [read_result(s, tmp_path / f"s{s}") for s in range(3)]
    assert [r.final for r in results] == [20.4, 3.6, None]
    assert [r.greedy_low for r in results] == [19.0, 3.6, 19.0]  # the final one is after
    rows = [line.split("|") for line in table(results).splitlines() if line.startswith("| ")]
    final = {row[1].strip(): row[-3].strip() for row in rows}
    assert final["seed"] == "final weights"
    assert [final[k] for k in ("0", "1", "2")] == ["+20.4", "+3.6", ""]
    assert final["**worst**"] == "+3.6" and final["**median**"] == "+12.0"


def test_every_start_has_a_column_of_best_pt_and_the_final_weights(tmp_path):
    reached = {"18": 1_000_000}

    def starts(best, final, final_scores):  # starts.json: weighted means, and the scores
        return {"best": {"mean": best}, "final": {"mean": final, "scores": final_scores}}

    played = (starts(19.5, 16.6, [11.0, 20.0]), starts(18.1, 20.4, [20.0, 21.0]), None)
    for seed, kept in enumerate(played):
        fake_run(tmp_path / f"s{seed}", seed, reached, 1_000_000, True)
        if kept is not None:
            (tmp_path / f"s{seed}" / "starts.json").write_text(json.dumps(kept))
    results = [read_result(s, tmp_path / f"s{s}") for s in range(3)]
    assert [r.starts_final_low for r in results] == [11.0, 20.0, None]
    rows = [line.split("|") for line in table(results).splitlines() if line.startswith("| ")]
    cells = {row[1].strip(): row[-2].strip() for row in rows}
    assert cells["seed"] == "every start: best.pt / final (lowest)"
    assert [cells[k] for k in ("0", "1", "2")] == ["+19.5 / +16.6 (+11)", "+18.1 / +20.4 (+20)", ""]
    # the worst of each: the lowest best.pt, final weights and lowest start
    assert cells["**worst**"] == "+18.1 / +16.6 (+11)"


def test_score_starts_plays_best_pt_and_the_final_weights_from_every_start_once(tmp_path):
    run_dir = fake_run(tmp_path / "s0", 0, {"18": 1_000_000}, 1_000_000, True)
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["preset"]["eval"] = {"max_frames": 200}  # games cut short: an untrained agent
    (run_dir / "summary.json").write_text(json.dumps(summary))
    net = DQN((4, 42, 42), 6, network="small", layer_norm=True)
    pipeline = resolve_pipeline("small")
    for name, steps in (("best.pt", 500), ("checkpoint.pt", 1_000)):
        checkpoint = Checkpoint(
            game="pong", pipeline=pipeline, preset={}, obs_shape=[4, 42, 42], actions=6,
            dueling=False, frames=steps, net=net.state_dict(), network="small", layer_norm=True,
        )  # fmt: skip
        save_checkpoint(checkpoint, run_dir / name)
    played = score_starts(run_dir)
    # pong-fast's ale-style start: one FIRE frame, then 0 to 28 NOOP frames (0 twice as often)
    assert [played[k]["steps"] for k in ("best", "final")] == [500, 1_000]
    assert played["final"]["noops"] == list(range(29)) and len(played["final"]["scores"]) == 29
    assert played["final"]["weights"][0] == pytest.approx(2 / 30)
    result = read_result(0, run_dir)
    assert result.starts_final == pytest.approx(played["final"]["mean"])
    (run_dir / "checkpoint.pt").unlink()  # once: starts.json is read, nothing played again
    assert score_starts(run_dir) == played


def test_score_starts_plays_the_average_where_the_run_kept_one(tmp_path, monkeypatch):
    # eval.average_steps: the run evaluated the average, and so does the report
    import torch

    import atari_speed.run.evaluation as evaluation

    run_dir = fake_run(tmp_path / "s0", 0, {"18": 1_000_000}, 1_000_000, True)
    weights, average = DQN((4, 42, 42), 6, network="small"), DQN((4, 42, 42), 6, network="small")
    checkpoint = Checkpoint(
        game="pong", pipeline=resolve_pipeline("small"), preset={}, obs_shape=[4, 42, 42],
        actions=6, dueling=False, frames=1_000, net=weights.state_dict(), network="small",
        average={"weights": average.state_dict(), "at": 1_000},
    )  # fmt: skip
    save_checkpoint(checkpoint, run_dir / "checkpoint.pt")
    played: list[torch.Tensor] = []

    def record(pipeline, game, net, max_frames):
        played.append(net.state_dict()["head.2.bias"].clone())
        return {"noops": [0], "weights": [1.0], "scores": [0.0], "mean": 0.0}

    monkeypatch.setattr(evaluation, "play_every_start", record)
    score_starts(run_dir)
    assert len(played) == 1 and torch.equal(played[0], average.state_dict()["head.2.bias"])
    assert not torch.equal(played[0], weights.state_dict()["head.2.bias"])
    # a run that evaluates the average from a smoothed 15 (eval.average_from) and stopped
    # at 5 would evaluate the weights as they are there: so does the report; at 16, the average
    for smoothed, want in ((5.0, weights), (16.0, average)):
        below = Checkpoint(
            game="pong", pipeline=resolve_pipeline("small"), obs_shape=[4, 42, 42], actions=6,
            dueling=False, frames=1_000, net=weights.state_dict(), network="small",
            preset={"eval": {"average_from": 15.0}},
            stats={"record": {"scores": {"smoothed": smoothed}}},
            average={"weights": average.state_dict(), "at": 1_000},
        )  # fmt: skip
        save_checkpoint(below, run_dir / "checkpoint.pt")
        (run_dir / STARTS_FILE).unlink()
        score_starts(run_dir)
        assert torch.equal(played[-1], want.state_dict()["head.2.bias"]), smoothed
    assert len(played) == 3


def test_resumed_runs_are_named_under_the_table_with_where_they_were_resumed(tmp_path):
    reached = {"18": 1_000_000}
    fake_run(tmp_path / "s0", 0, reached, 1_000_000, True)
    fake_run(tmp_path / "s1", 1, reached, 1_000_000, True, resumed_at=[])
    fake_run(tmp_path / "s7", 7, reached, 1_000_000, True, resumed_at=[507_904, 1_001_472])
    results = [read_result(s, tmp_path / f"s{s}") for s in (0, 1, 7)]
    assert [r.resumed_at for r in results] == [(), (), (507_904, 1_001_472)]
    text = table(results)
    assert "Resumed (--resume): seed 7 at 0.51M, 1.00M." in text
    assert "seed 0" not in text and "seed 1" not in text
    assert "Resumed" not in table(results[:2])


def test_games_after_the_greedy_solve_are_counted_with_their_mean(tmp_path):
    reached = {"0": 400_000, "18": 900_000}
    for seed, greedy in ((0, 600_000), (1, 800_000), (2, None)):
        path = fake_run(tmp_path / f"s{seed}", seed, reached, 900_000, True, greedy=greedy)
        games = [(550_000, 20), (600_000, 4), (700_000, 21), (800_000, 14), (900_000, 19)]
        rows = "".join(f"{f / 1000:.0f},{f},{score},0\n" for f, score in games)
        cut = "1000,900000," if seed == 0 else ""  # a last line cut short by a killed run
        (path / "scores.csv").write_text("seconds,steps,score,smoothed\n" + rows + cut)
    results = [read_result(s, tmp_path / f"s{s}") for s in range(3)]
    # from the greedy solve on, the game that ended at its very step included
    assert (results[0].games_after, results[0].level_after) == (4, 14.5)
    assert (results[1].games_after, results[1].level_after) == (2, 16.5)
    assert (results[2].games_after, results[2].level_after) == (None, None)  # no greedy solve
    lines = table(results).splitlines()
    column = [c.strip() for c in lines[0].split("|")].index("games after (mean)")
    cells = {ln.split("|")[1].strip(): ln.split("|")[column].strip() for ln in lines if "|" in ln}
    assert (cells["0"], cells["1"], cells["2"]) == ("4 (+14.5)", "2 (+16.5)", "")
    assert cells["**worst**"] == "(+14.5)" and cells["**median**"] == "(+15.5)"


def test_the_games_the_rule_asks_start_from_the_smoothed_score_before_the_greedy_solve(tmp_path):
    evaluations = [(500_000, 12.0), (600_000, 19.8), (700_000, 20.5)]
    for seed, greedy in ((0, 600_000), (1, 700_000), (2, None), (3, 600_000)):
        evals = [(600_000, 18.0)] if seed == 3 else evaluations  # 3: an agent of exactly 18
        path = fake_run(
            tmp_path / f"s{seed}", seed, {"18": 900_000}, 900_000, True, greedy=greedy,
            evaluations=evals,
        )  # fmt: skip
        # (agent step, score, smoothed): the game ending at the solve's step is one after it
        games = [(550_000, 5, -14.9), (600_000, 9, -14.2), (650_000, 20, 3.0), (800_000, 20, 17)]
        rows = "".join(f"{f / 1000:.0f},{f},{score},{sm}\n" for f, score, sm in games)
        (path / "scores.csv").write_text("seconds,steps,score,smoothed\n" + rows)
    results = [read_result(s, tmp_path / f"s{s}") for s in range(4)]
    # from the smoothed score before the solve, at the mean of the evaluation that solved
    assert results[0].rule_games == games_to_reach(-14.9, 19.8, 18.0) > 100
    assert results[1].rule_games == games_to_reach(3.0, 20.5, 18.0)
    assert results[2].rule_games is None  # no greedy solve
    assert math.isinf(results[3].rule_games)  # the smoothed score only nears 18

    def column(rows):
        lines = table(rows).splitlines()
        at = [c.strip() for c in lines[0].split("|")].index("games the rule asks")
        return {ln.split("|")[1].strip(): ln.split("|")[at].strip() for ln in lines if "|" in ln}

    cells = column(results)
    assert cells["0"] == f"{results[0].rule_games:.0f}" and cells["2"] == ""
    assert cells["3"] == "never" and cells["**worst**"] == "never"
    assert column(results[:3])["**worst**"] == cells["0"]


def test_the_evaluations_cpu_share_has_a_column_whose_worst_is_the_largest(tmp_path):
    for seed, share in enumerate((0.031, 0.151, None)):  # None: a summary before the field
        fake_run(tmp_path / f"s{seed}", seed, {"18": 1_000_000}, 1_000_000, True, eval_share=share)
    results = [read_result(s, tmp_path / f"s{s}") for s in range(3)]
    lines = table(results).splitlines()
    column = [c.strip() for c in lines[0].split("|")].index("eval CPU")
    cells = {ln.split("|")[1].strip(): ln.split("|")[column].strip() for ln in lines if "|" in ln}
    assert (cells["0"], cells["1"], cells["2"]) == ("3.1%", "15.1%", "")
    assert cells["**worst**"] == "15.1%" and cells["**median**"] == "9.1%"


def write_games(path, games):
    rows = "".join(f"{f / 1000:.0f},{f},{score},0\n" for f, score in games)
    (path / "scores.csv").write_text("seconds,steps,score,smoothed\n" + rows)


def test_against_another_set_pairs_the_seeds_and_says_where_their_games_parted(tmp_path):
    base, lever = tmp_path / "base", tmp_path / "lever"
    shared = [(100_000, -21), (200_000, -15)]
    # seed 0: the lever's games part at the third (same step, another score); seed 1: the
    # same games as far as the shorter ran; seed 2 is in the base set only
    for seed, solve, games in ((0, 900_000, [(300_000, 5)]), (1, 1_100_000, [(300_000, 2)])):
        path = fake_run(base / f"s{seed}", seed, {"-15": 200_000, "18": solve}, solve, True)
        write_games(path, shared + games)
    fake_run(base / "s2", 2, {"-15": 200_000}, 1_500_000, False)
    path = fake_run(lever / "s0", 0, {"-15": 200_000, "18": 700_000}, 700_000, True, greedy=500_000)
    write_games(path, [*shared, (300_000, 9), (400_000, 20)])
    path = fake_run(lever / "s1", 1, {"-15": 200_000}, 1_500_000, False)
    write_games(path, [*shared, (300_000, 2), (500_000, 3)])
    text, _ = report([0, 1, 2], base, "base", against=lever)
    compared = text.split("## Against")[1].split("## Pooled")[0]
    rows = {
        ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[2:-1]]
        for ln in compared.splitlines()
        if ln.startswith("| ")
    }
    assert "2" not in rows  # not in the other set
    assert rows["0"][0] == "0.20M / 0.20M" and rows["0"][2] == "not by 0.90M / 0.50M"
    assert rows["0"][3] == "0.90M / 0.70M" and rows["0"][-1] == "0.30M"
    assert rows["1"][3] == "1.10M / not by 1.50M" and rows["1"][-1] == "same to 0.30M"
    assert rows["**worst**"][3] == "1.10M / not solved"
    assert rows["**median**"][3] == "1.00M / not solved"
    assert "2 / 1 of 2 seeds solved" in compared
    assert seeds_module.parted_at(base / "s2", lever / "s0") == (True, 1000)  # s2: fake_run's game


def test_midranks_share_ties_and_count_unsolved_as_the_slowest():
    ranks = midranks([0.5, math.inf, 0.2, 0.5, math.inf])
    assert ranks.tolist() == [2.5, 4.5, 1.0, 2.5, 4.5]


def test_the_rank_sum_p_counts_the_splits_at_least_as_extreme():
    # 2 runs against 2: of the 6 ways to split the four, one puts both fastest first
    assert rank_sum_p([1.0, 2.0], [3.0, 4.0]) == pytest.approx(1 / 6)
    assert rank_sum_p([3.0, 4.0], [1.0, 2.0]) == 1.0
    assert rank_sum_p([1.0, 3.0], [2.0, 4.0]) == pytest.approx(2 / 6)  # sums 3 and 4 of 3..7
    # every run unsolved by the cap: nothing to tell the sets apart
    assert rank_sum_p([math.inf] * 3, [math.inf] * 4) == 1.0
    # 10 against 10 has 184,756 splits: drawn, seeded, so the same p each time
    fast, slow = [float(i) for i in range(10)], [float(i) for i in range(10, 20)]
    assert rank_sum_p(fast, slow) == rank_sum_p(fast, slow) < 0.001
    assert rank_sum_p(slow, fast) == 1.0


def test_pooled_against_another_set_takes_every_run_to_a_common_cap(tmp_path):
    base, lever = tmp_path / "base", tmp_path / "lever"
    full = {"-15": 300_000, "0": 500_000}
    # the base set, budget 1.5M: seeds 0-3, one solved after the lever's 1.0M cap
    for seed, solve in ((0, 800_000), (1, 900_000), (2, 1_200_000)):
        fake_run(base / f"s{seed}", seed, {**full, "18": solve}, solve, True)
    fake_run(base / "s3", 3, {"-15": 600_000}, 1_500_000, False)
    fake_run(base / "s9", 9, {}, 400_000, False)  # stopped part way: not finished
    # the lever, budget 1.0M, other seeds: all reach 0 sooner, one does not solve by its cap
    for seed, solve in ((5, 600_000), (6, 650_000)):
        fake_run(lever / f"s{seed}", seed, {"-15": 200_000, "0": 300_000, "18": solve}, solve, True)
    fake_run(lever / "s7", 7, {"-15": 200_000, "0": 350_000}, 1_000_000, False, budget=1_000_000)
    text, _ = report([5, 6, 7], lever, "lever", against=base)
    pooled = text.split("## Pooled")[1]
    rows = {
        ln.split("|")[1].strip(): [c.strip() for c in ln.split("|")[2:-1]]
        for ln in pooled.splitlines()
        if ln.startswith("| ")
    }
    assert "by 1.00M agent steps" in pooled  # the lever's unsolved run's budget
    assert rows["smoothed 0"][:4] == ["3 of 3", "0.30M", "3 of 4", "0.50M"]
    # base's seed 2 solved at 1.2M: past the cap, so not reached
    assert rows["smoothed 18 (solved)"][:4] == ["2 of 3", "0.65M", "2 of 4", "not solved"]
    # to 0: the lever's three runs are the three fastest of seven: 1 split in 35
    assert float(rows["smoothed 0"][4]) == pytest.approx(1 / 35, abs=5e-4)
    assert float(rows["smoothed 0"][5]) == 1.0
    assert "base/s9" in pooled.split("Not finished, left out:")[1]
    # a set whose every run solved within its 1.0M budget still caps the other set there:
    # had one not solved, it would have been seen only to 1.0M
    quick = tmp_path / "quick"
    for seed in (5, 6):
        fake_run(quick / f"s{seed}", seed, {"18": 700_000}, 700_000, True, budget=1_000_000)
    text, _ = report([5, 6], quick, "quick", against=base)
    assert "by 1.00M agent steps" in text.split("## Pooled")[1]


def test_the_best_smoothed_score_is_never_rounded_up_to_a_solve():
    cells = [seeds_module._best(x, "") for x in (17.95, 18.2, 0.3, -20.21, None)]
    assert cells == ["+17.9", "+18.2", "+0.3", "-20.3", ""]


def test_fps_alone_sets_the_minutes(tmp_path):
    fake_run(tmp_path / "s0", 0, {"18": 1_200_000}, 1_200_000, True, fps=300.0)
    slow = table([read_result(0, tmp_path / "s0")])
    fast = table([read_result(0, tmp_path / "s0")], fps_alone=1500.0)
    assert "| 66.7 |" in slow and "| 13.3 |" in fast
    assert "1,500 FPS measured alone" in fast


@OLD_AND_NEW
def test_a_run_is_finished_when_solved_or_out_of_budget(tmp_path, old):
    fake_run(tmp_path / "a", 0, {"18": 1}, 900_000, True, old=old)
    fake_run(tmp_path / "b", 0, {}, 1_500_000, False, old=old)
    fake_run(tmp_path / "c", 0, {}, 700_000, False, old=old)
    assert finished(tmp_path / "a") and finished(tmp_path / "b")
    assert not finished(tmp_path / "c") and not finished(tmp_path / "missing")


def test_a_missing_summary_names_the_file(tmp_path):
    with pytest.raises(ValueError, match=r"s7/summary.json"):
        read_result(7, tmp_path / "s7")


def test_lanes_share_the_cores():
    assert lane_cores(2, [0, 1]) == [[0], [1]]
    assert lane_cores(1, [0, 1, 2, 3]) == [[0, 1, 2, 3]]
    assert lane_cores(2, list(range(8))) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert lane_cores(3, [0, 1]) == [[0], [1], [0]]
    assert lane_cores(1, [1]) == [[1]]  # under taskset -c 1: that core, not core 0


FAKE_TRAIN = """
import json, os, sys
from pathlib import Path
run_dir, seed = Path(sys.argv[1]), int(sys.argv[2])
run_dir.mkdir(parents=True, exist_ok=True)
summary = {"frames": 1000 * (seed + 1), "seconds": 1.0, "fps": 1000.0, "solved": True,
           "reached": {"18": {"frames": 1000 * (seed + 1), "seconds": 1.0}},
           "cores": sorted(os.sched_getaffinity(0)), "threads": os.environ["OMP_NUM_THREADS"],
           "preset": {"run": {"stop_reward": 18.0, "frames": 10**6, "seconds": 0.0}}}
(run_dir / "summary.json").write_text(json.dumps(summary))
"""


def test_run_seeds_trains_each_seed_once_in_its_lane(tmp_path, monkeypatch):
    import sys

    from atari_speed.app import seeds

    calls = []

    def fake_command(preset, seed, run_dir, extra):
        calls.append((preset, seed, list(extra)))
        return [sys.executable, "-c", FAKE_TRAIN, str(run_dir), str(seed)]

    monkeypatch.setattr(seeds, "train_command", fake_command)
    monkeypatch.setattr(seeds.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(seeds.os, "sched_getaffinity", lambda pid: {0, 1})  # a 2-core machine
    ended = []
    seeds.run_seeds("pong-fast", [0, 1, 2], tmp_path, ["--frames", "9"], 2, False, ended.append)
    assert sorted(c[1] for c in calls) == [0, 1, 2]
    assert sorted(ended) == [0, 1, 2], "each seed handed on as it finished"
    assert all(c[0] == "pong-fast" and c[2] == ["--frames", "9"] for c in calls)
    for seed in (0, 1, 2):
        summary = json.loads((tmp_path / f"s{seed}" / "summary.json").read_text())
        assert len(summary["cores"]) == 1 and summary["threads"] == "1", "one core a lane"
        assert (tmp_path / f"s{seed}.log").is_file()
    # finished seeds are kept, not trained again
    calls.clear()
    seeds.run_seeds("pong-fast", [0, 1, 2], tmp_path, [], 2, False, ended.append)
    assert calls == []
    assert len(ended) == 3, "a seed kept, not trained here, is not handed on"
    # a run that did not finish is refused, naming its directory
    (tmp_path / "s3").mkdir()
    with pytest.raises(ValueError, match=r"s3: a run that did not finish"):
        seeds.run_seeds("pong-fast", [3], tmp_path, [], lanes=1)
    # with --resume, one with a checkpoint goes on from it, its log appended to
    (tmp_path / "s4").mkdir()
    (tmp_path / "s4" / "checkpoint.pt").write_bytes(b"")
    (tmp_path / "s4.log").write_text("the first leg\n")
    with pytest.raises(ValueError, match=r"s4: .* or pass --resume"):
        seeds.run_seeds("pong-fast", [4], tmp_path, [], lanes=1)
    calls.clear()
    with pytest.raises(ValueError, match=r"s3: .* \(it has no checkpoint\.pt"):
        seeds.run_seeds("pong-fast", [3, 4], tmp_path, ["--frames", "9"], resume=True)
    assert calls == [], "nothing starts while a seed is refused"
    shutil.rmtree(tmp_path / "s3")
    seeds.run_seeds("pong-fast", [0, 4], tmp_path, ["--frames", "9"], resume=True)
    checkpoint = str(tmp_path / "s4" / "checkpoint.pt")
    assert calls == [("pong-fast", 4, ["--frames", "9", "--resume", checkpoint])]
    assert (tmp_path / "s4.log").read_text().startswith("the first leg\n")
    # a seed whose directory another run holds (a second seeds.py): skipped, log untouched
    from atari_speed.run.lock import RunDirLock

    shutil.rmtree(tmp_path / "s4")
    (tmp_path / "s4").mkdir()
    (tmp_path / "s4" / "checkpoint.pt").write_bytes(b"")
    held = RunDirLock(tmp_path / "s4").acquire()
    calls.clear()
    try:
        seeds.run_seeds("pong-fast", [4, 5], tmp_path, ["--frames", "9"], resume=True)
    finally:
        held.release()
    assert [c[1] for c in calls] == [5], "seed 5 trained, seed 4 skipped"
    assert (tmp_path / "s4.log").read_text().startswith("the first leg\n")


def test_a_seed_another_seeds_py_ran_after_this_one_listed_it_is_not_run_again(
    tmp_path, monkeypatch
):
    # Two seeds.py sharing --out, one per core: each lists its seeds at its start, and one
    # may finish a seed before the other reaches it. Starting it then would empty its log.
    import sys

    from atari_speed.app import seeds
    from atari_speed.core.errors import ConfigError

    # were the checks gone, a process that does nothing starts, not a training run
    monkeypatch.setattr(seeds, "train_command", lambda *args: [sys.executable, "-c", ""])

    done = tmp_path / "s0"
    done.mkdir()
    summary = {"steps": 1000, "seconds": 1.0, "solved": True}
    summary["preset"] = {"run": {"stop_reward": 18.0, "steps": 10**6, "seconds": 0.0}}
    (done / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "s0.log").write_text("the other's run\n")
    with pytest.raises(ConfigError, match=r"s0: finished by another run"):
        seeds.start("pong-fast", 0, tmp_path, [], [0])
    begun = tmp_path / "s1"
    begun.mkdir()
    (begun / "scores.csv").write_text("seconds,steps,score,smoothed\n")
    with pytest.raises(ConfigError, match=r"s1: written by another run"):
        seeds.start("pong-fast", 1, tmp_path, [], [0])
    assert (tmp_path / "s0.log").read_text() == "the other's run\n"


WINNER = """
import sys, time
print("the winner's first line", flush=True)
time.sleep(60)
"""


def test_a_second_start_of_a_seed_before_its_train_py_holds_the_directory_is_refused(
    tmp_path, monkeypatch
):
    # The window: train.py locks its directory only once it is up, so a check of that lock
    # alone lets a second seeds.py through, and its "w" would empty the winner's log.
    import sys

    from atari_speed.app import seeds
    from atari_speed.core.errors import ConfigError

    def never_locks(preset, seed, run_dir, extra):
        return [sys.executable, "-c", WINNER]

    monkeypatch.setattr(seeds, "train_command", never_locks)
    winner = seeds.start("pong-fast", 0, tmp_path, [], [0])
    log = tmp_path / "s0.log"
    try:
        deadline = time.monotonic() + 30
        while not log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(ConfigError, match=rf"{log}: written by a run another seeds.py"):
            seeds.start("pong-fast", 0, tmp_path, [], [0])
        assert log.read_text() == "the winner's first line\n"
    finally:
        winner.kill()
        winner.wait(timeout=10)
    again = seeds.start("pong-fast", 0, tmp_path, [], [0])  # the winner gone, its lock too
    again.kill()
    again.wait(timeout=10)


def test_a_filesystem_without_locks_stops_seeds_py_in_one_line(tmp_path, monkeypatch):
    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(seeds_module.fcntl, "flock", no_locks)
    with pytest.raises(
        ValueError, match=r"s3\.log: this filesystem cannot lock files \(ENOLCK\)"
    ) as err:
        lock_log(tmp_path / "s3.log")
    # a ConfigError would read as "another seeds.py runs this seed" and skip the seed
    assert not isinstance(err.value, ConfigError)


@pytest.mark.parametrize("stage", ["run_seeds", "score"])
def test_ctrl_c_stops_seeds_py_in_one_line(tmp_path, monkeypatch, capsys, stage):
    # Ctrl-C while the seeds train, or while play.py scores them: a line saying how to go
    # on and exit status 130, not a traceback.
    import importlib.util

    spec = importlib.util.spec_from_file_location("seeds_script", ROOT / "benchmarks/seeds.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(script, "run_seeds", lambda *a, **k: None)
    monkeypatch.setattr(script, "score", lambda *a, **k: None)
    monkeypatch.setattr(script, stage, interrupted)
    assert script.main(["--seeds", "0", "--out", str(tmp_path / "out")]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "seeds.py: stopped" in err and "--resume" in err


# A stand-in for train.py: says it is up, then on SIGTERM writes "stopped" and exits.
_RUN = """
import pathlib, signal, sys, time
run_dir = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *a: (run_dir.joinpath("stopped").write_text("1"), sys.exit(0)))
run_dir.joinpath("up").write_text("1")
time.sleep(120)
"""

# seeds.py as a user starts it, its train.py replaced by the stand-in above.
_SEEDS = """
import runpy, sys
import atari_speed.app.seeds as seeds
run, out, script = sys.argv[1:4]
seeds.train_command = lambda preset, seed, run_dir, extra: [sys.executable, "-c", run, str(run_dir)]
sys.argv = [script, "--seeds", "0,1", "--lanes", "2", "--out", out]
runpy.run_path(script, run_name="__main__")
"""


@pytest.mark.parametrize("script", ["benchmarks/seeds.py", "benchmarks/atari5.py"])
def test_sigterm_stops_the_launcher_and_each_run_it_started(tmp_path, script):
    # `kill PID` of seeds.py (or atari5.py) stops its train.py runs as Ctrl-C does, so
    # they save their checkpoints; before, they ran on as orphans.
    atari5 = script.endswith("atari5.py")
    launcher = _SEEDS
    if atari5:  # its runs are <out>/<game>/s<seed>
        launcher = launcher.replace('"--lanes"', '"--train", "--games", "breakout", "--lanes"')
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-c", launcher, _RUN, str(out), str(ROOT / script)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    runs = [(out / "breakout" if atari5 else out) / f"s{s}" for s in (0, 1)]
    deadline = time.monotonic() + 60
    while not all((run / "up").is_file() for run in runs):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()  # before reading its output: a launcher still waiting would block it
            pytest.fail(f"the runs did not both start: {proc.communicate()}")
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "stopped" in err and "--resume" in err
    assert all((run / "stopped").is_file() for run in runs)
