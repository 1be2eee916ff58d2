"""benchmarks/atari5.py: human-normalised scores and the Atari-5 estimate of the median."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("atari5", ROOT / "benchmarks/atari5.py")
atari5 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(atari5)


def fake_run(
    run: Path, game: str, games: list[tuple[int, float, float]], steps: str = "steps"
) -> Path:
    """A train.py run directory as atari5.py reads it: summary.json, and scores.csv with
    one (agent steps, score, smoothed) row per finished game. ``steps``: the key of agent
    steps, "frames" in the summaries of earlier versions."""
    run.mkdir()
    summary = {"preset": {"env": {"game": game}}, steps: 1000, "seconds": 60.0, "fps": 16.7}
    summary["emulator_frames"] = 10_002_944  # a 10M-frame budget, ended on a whole rollout
    (run / "summary.json").write_text(json.dumps(summary))
    with (run / "scores.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["seconds", steps, "score", "smoothed"])
        writer.writerows([steps / 100, steps, score, smoothed] for steps, score, smoothed in games)
    return run


def test_random_play_is_0_and_the_human_tester_100_percent():
    for game, (random, human) in atari5.REFERENCE.items():
        assert atari5.normalised(game, random) == pytest.approx(0.0)
        assert atari5.normalised(game, human) == pytest.approx(100.0)
    # Double Dunk's scores are negative: a higher (less negative) score is still better
    assert atari5.normalised("double_dunk", -17.0) > atari5.normalised("double_dunk", -18.0)


def test_the_estimate_is_near_the_57_game_median():
    # DDQN (noop)'s human-normalised scores (percent) on the five games and its median over
    # the 57, as the Atari-5 repository's data holds them (maitchison/Atari-5 at 118cad5)
    scores = dict(zip(atari5.ATARI5, (84.24, 606.98, 144.59, 177.30, 112.29), strict=True))
    estimate = atari5.atari5_median(scores)
    # the repository's fitted regression gives 109.6 for these scores; the true median is
    # 115.2, within the regression's ~10% error
    assert estimate == pytest.approx(109.6, abs=0.5)
    assert abs(estimate - 115.2) / 115.2 < 0.1


def test_games_at_or_below_random_play_estimate_a_median_of_0():
    # log10(1 + max(score, 0)) is 0 for every game
    assert atari5.atari5_median(dict.fromkeys(atari5.ATARI5, -30.0)) == pytest.approx(0.0)


@pytest.mark.parametrize("steps", ["steps", "frames"], ids=["steps", "earlier frames"])
def test_the_table_reads_a_run_and_its_play_json(tmp_path, capsys, steps):
    # 150 games: only the last 100 (scores 10) count
    games = [(i, 0 if i < 50 else 10, 0) for i in range(150)]
    run = fake_run(tmp_path / "run", "breakout", games, steps)
    (run / "play.json").write_text(json.dumps({"mean": 30.5}))
    assert atari5.main([str(run), "--png-dir", str(tmp_path / "png")]) == 0
    assert (tmp_path / "png" / "breakout.png").stat().st_size > 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| breakout"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == ["10.0", "30.5", "1,000"]  # the agent steps, under either key
    assert cells[-2] == f"{atari5.normalised('breakout', 10.0):.0f}% / 100%"
    assert cells[-1] == "{:.1f} / {:.1f}".format(*atari5.DOPAMINE_10M["breakout"])
    assert "Atari-5 estimate of the 57-game median" not in out  # one game of the five


def test_the_steps_table_takes_the_last_game_ended_by_each_step(tmp_path, capsys):
    steps = (100, 300, 500, 700)  # games end at these agent steps
    runs = [
        fake_run(tmp_path / name, "qbert", [(step, 0, offset + step) for step in steps])
        for name, offset in (("a", 0.0), ("b", 100.0))
    ]
    assert atari5.main([*map(str, runs), "--at", "50,300,650,1e3"]) == 0
    lines = capsys.readouterr().out.split("Smoothed training score at equal agent steps:")[1]
    table = [line for line in lines.splitlines() if line.startswith("|")][2:]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table]
    assert len(rows) == 4
    assert rows[0] == ["50 (0.0002M)", "-", "-"]  # before any game ended
    assert rows[1] == ["300 (0.0012M)", "300.0", "400.0"]  # the game ending at the step
    assert rows[2] == ["650 (0.0026M)", "500.0", "600.0"]
    assert rows[3] == ["1,000 (0.004M)", "700.0", "800.0"]


def test_a_play_json_still_being_written_is_a_one_line_error(tmp_path):
    run = fake_run(tmp_path / "run", "qbert", [(1, 25, 25)])
    (run / "play.json").write_text("")  # play.py > play.json, before its output came
    with pytest.raises(SystemExit, match=r"play\.json: not play\.py's --json output"):
        atari5.main([str(run)])


def test_the_counts_name_the_games_ahead_of_each_dopamine_agent(tmp_path, capsys):
    dqn, rainbow = atari5.DOPAMINE_10M["name_this_game"]
    runs = [
        # between Dopamine's DQN and its Rainbow
        fake_run(tmp_path / "a", "name_this_game", [(1, (dqn + rainbow) / 2, 0)]),
        # 0.1 under the DQN: behind both
        fake_run(tmp_path / "b", "breakout", [(1, atari5.DOPAMINE_10M["breakout"][0] - 0.1, 0)]),
    ]
    assert atari5.main(list(map(str, runs))) == 0
    out = capsys.readouterr().out
    assert "Ahead of Dopamine's DQN at 10M frames (training scores): 1 of 2 (name_this_game)" in out
    assert "Ahead of Dopamine's Rainbow at 10M frames (training scores): 0 of 2 (none)" in out
    # their own estimates, as docs/atari.md states them
    assert "Dopamine's DQN, Atari-5 estimate: 9.6%" in out
    assert "Dopamine's Rainbow, Atari-5 estimate: 43.1%" in out


def test_a_game_given_twice_counts_once_by_its_last_run(tmp_path, capsys):
    dqn = atari5.DOPAMINE_10M["qbert"][0]
    ahead = fake_run(tmp_path / "ahead", "qbert", [(1, dqn + 1, 0)])
    behind = fake_run(tmp_path / "behind", "qbert", [(1, dqn - 1, 0)])
    (ahead / "play.json").write_text(json.dumps({"mean": 13455.0}))  # human level
    assert atari5.main([str(ahead), str(behind)]) == 0
    captured = capsys.readouterr()
    assert "(training scores): 0 of 1 (none)" in captured.out
    assert f"qbert given twice: {behind} counts" in captured.err
    assert "10M" not in captured.err, "both ran 10M frames"
    # the greedy scores are the last run's too: with the other four Atari-5 games played,
    # there is a greedy estimate only while qbert's last run has a play.json
    others = []
    for game in ("battle_zone", "double_dunk", "name_this_game", "phoenix"):
        others.append(fake_run(tmp_path / game, game, [(1, 0.0, 0)]))
        (others[-1] / "play.json").write_text(json.dumps({"mean": 0.0}))
    greedy_estimate = "Atari-5 estimate of the 57-game median (greedy)"
    assert atari5.main([*map(str, others), str(behind), str(ahead)]) == 0
    assert greedy_estimate in capsys.readouterr().out
    assert atari5.main([*map(str, others), str(ahead), str(behind)]) == 0
    assert greedy_estimate not in capsys.readouterr().out


def test_a_run_of_other_than_10m_frames_is_said_not_at_equal_frames(tmp_path, capsys):
    run = fake_run(tmp_path / "short", "phoenix", [(1, 9000.0, 0)])
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "emulator_frames": 2_000_000}))
    assert atari5.main([str(run)]) == 0
    assert f"{run}: 2,000,000 emulator frames, not 10M" in capsys.readouterr().err
