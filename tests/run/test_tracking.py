"""Game scores: smoothing, the best, and when the smoothed score first reached -15, 0 and
the stop reward."""

from __future__ import annotations

import dataclasses
import math

import pytest

from atari_speed.agent.actor import Game
from atari_speed.run.tracking import EMA_ALPHA, Scores, games_to_reach


def test_smoothed_score_milestones_are_recorded_once_when_first_reached():
    scores = Scores(stop_reward=18.0)
    improved = [scores.add(Game(-21.0, 800), seconds=10.0, frames=800)]
    assert scores.smoothed == -21.0 and scores.reached == {}
    seconds = 10.0
    while scores.solved_at is None:
        seconds += 10.0
        improved.append(scores.add(Game(21.0, 900), seconds, int(seconds * 100)))
    assert all(improved) and scores.best_smoothed == scores.smoothed >= 18.0
    assert set(scores.reached) == {"-15", "0", "18"}
    assert scores.reached["18"] == scores.solved_at
    assert scores.reached["-15"][0] < scores.reached["0"][0] < scores.reached["18"][0]
    # The EMA: -21 then +21s, as the book smooths
    games = round((seconds - 10.0) / 10.0)
    assert scores.smoothed == pytest.approx(21 - 42 * EMA_ALPHA**games)
    first_zero = scores.reached["0"]
    assert not scores.add(Game(-21.0, 700), seconds + 10, 1)
    scores.add(Game(21.0, 700), seconds + 20, 2)
    assert scores.reached["0"] == first_zero, "recorded once"


@pytest.mark.parametrize(
    ("start", "level"), [(-14.9, 19.8), (-14.7, 18.7), (1.1, 20.8), (17.9, 21.0), (-21.0, 18.05)]
)
def test_games_to_reach_is_the_game_whose_smoothed_score_first_reaches_the_target(start, level):
    scores = Scores(stop_reward=18.0)
    scores.add(Game(start, 1), seconds=0.0, frames=1)  # the first game sets the smoothed score
    games = 0
    while scores.solved_at is None and games < 10_000:
        games += 1
        scores.add(Game(level, 1), seconds=0.0, frames=1 + games)
    assert games_to_reach(start, level, 18.0) == games


def test_games_to_reach_at_or_past_the_target_and_below_it():
    assert games_to_reach(18.5, 10.0, 18.0) == 0
    assert math.isinf(games_to_reach(-5.0, 17.9, 18.0))
    assert games_to_reach(None, 19.0, 18.0) == 1 and math.isinf(games_to_reach(None, 17.0, 18.0))


def tracker_at(tmp_path, **run):
    import torch

    from atari_speed.core.config import load_preset
    from atari_speed.run.plan import Plan
    from atari_speed.run.tracking import Tracker

    sets = [f"run.{k}={v}" for k, v in run.items()]
    preset = load_preset("pong-pqn", sets)
    plan = Plan(preset, {"stages": []}, "pong", (4, 42, 42), 6, torch.device("cpu"))
    tmp_path.mkdir(parents=True, exist_ok=True)  # as Run makes it
    return Tracker(plan, tmp_path)


def test_the_greedy_solve_is_the_first_evaluation_at_the_stop_reward(tmp_path):
    tracker = tracker_at(tmp_path, stop_reward=18.0)
    assert tracker.evaluated(17.9, 100_000, 60.0), "the first is the best so far"
    assert tracker.record.eval_solved_at is None, "17.9 is short of 18"
    tracker.evaluated(18.5, 200_000, 120.0, cpu_seconds=3.0, games=[21, 16])
    tracker.evaluated(19.0, 300_000, 180.0)
    tracker.frames = 320_000
    s = tracker.summary()
    # the snapshot's agent steps and seconds, not the time the games finished
    assert (s["eval_solved_at_steps"], s["eval_solved_at_seconds"]) == (200_000, 120.0)
    assert s["best_eval_reward"] == 19.0 and s["eval_reward"] == 19.0
    assert [e["steps"] for e in s["evaluations"]] == [100_000, 200_000, 300_000]
    assert s["evaluations"][1]["cpu_seconds"] == 3.0
    # each game's score beside the mean: one lost game, or all of them a little worse
    assert s["evaluations"][1]["games"] == [21.0, 16.0]
    # a resumed run keeps it
    again = tracker_at(tmp_path / "resumed", stop_reward=18.0)
    again.restore(tracker.stats(), 320_000)
    assert again.record.eval_solved_at == (120.0, 200_000)
    tracker.close()
    again.close()


def test_without_a_terminal_progress_comes_as_lines(tmp_path, capsys):
    tracker = tracker_at(tmp_path, steps=1_000_000)
    assert tracker.lines, "pytest captures stderr: no terminal, so lines replace the bar"
    tracker.frames = 250_000
    tracker.fps = 1000.0
    tracker.scores.add(Game(-3.0, 900), 10.0, 250_000)
    tracker.log(epsilon=0.001, loss=0.0123, buffer_fill=1.0)  # under 30 s: no line yet
    assert capsys.readouterr().err == ""
    tracker.last_line -= 31.0
    tracker.fps = 0.0  # log() measures FPS over its window; keep what the line shows exact
    tracker._window = (tracker._window[0] - 250.0, 0)
    tracker.log(epsilon=0.001, loss=0.0123, buffer_fill=1.0)
    line = capsys.readouterr().err.strip()
    assert line.count("\n") == 0
    for part in ("steps 250,000/1,000,000 (25%)", "games 1", "smoothed -3.0", "eps 0.001"):
        assert part in line, line
    assert "frames" not in line, "agent steps are steps; frames are the emulator's"
    assert "loss 0.0123" in line and "FPS" in line and "ETA" in line
    assert "greedy" not in line
    tracker.evaluated(12.5, 250_000, 100.0)  # each evaluation prints a line at once
    line = capsys.readouterr().err
    assert "greedy 12.5" in line
    tracker.close()


def test_past_the_step_budget_the_line_says_nothing_is_left(tmp_path):
    # A run ends on a whole rollout, a little past run.steps (atari-84's Phoenix printed
    # "ETA -1h59m57s" at 2,502,656 of 2,500,000 agent steps).
    tracker = tracker_at(tmp_path, steps=2_500_000)
    tracker.frames, tracker.fps = 2_502_656, 756.0
    assert tracker.progress_line().endswith("ETA 0s")
    tracker.frames = 2_500_000 - 7560
    assert tracker.progress_line().endswith("ETA 10s")
    tracker.close()


def test_a_run_resumed_in_its_own_directory_forgets_its_logs_past_the_checkpoint(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    first = tracker_at(tmp_path)
    for frames, score in ((100, -21), (200, -20), (300, -19), (400, -18)):
        first.frames = frames
        first.game(Game(score, 50))
        if frames == 200:
            stats = first.stats()  # what a checkpoint at 200 frames holds
    first.close()
    # a row cut by a kill mid-write, besides the two games after the checkpoint
    with open(tmp_path / "scores.csv", "a") as log:
        log.write("41.0,45")
    resumed = tracker_at(tmp_path)
    resumed.restore(stats, 200, own_logs=True)
    resumed.frames = 250
    resumed.game(Game(-17, 50))
    resumed.close()
    rows = (tmp_path / "scores.csv").read_text().splitlines()
    frames_scores = [row.split(",")[1:3] for row in rows[1:]]
    assert frames_scores == [["100", "-21"], ["200", "-20"], ["250", "-17"]]
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    scalars = events.Scalars("episode/reward")
    # TensorBoard hides the first run's scalars past the checkpoint, not at it
    assert [(s.step, s.value) for s in scalars] == [(100, -21), (200, -20), (250, -17)]


def test_a_row_cut_before_the_checkpoint_is_dropped_not_appended_to(tmp_path):
    first = tracker_at(tmp_path)
    first.frames = 100
    first.game(Game(-21, 50))
    first.close()
    with open(tmp_path / "scores.csv", "a") as log:
        log.write("41.0,45")  # cut mid-write (a kill inside Tracker.game), then checkpointed
    resumed = tracker_at(tmp_path)
    resumed.restore(first.stats(), 100, own_logs=True)
    resumed.frames = 150
    resumed.game(Game(-19, 50))
    resumed.close()
    rows = (tmp_path / "scores.csv").read_text().splitlines()
    assert [row.split(",")[1] for row in rows[1:]] == ["100", "150"]


def test_a_run_resumed_elsewhere_or_from_an_older_checkpoint_leaves_scores_alone(tmp_path):
    text = "seconds,frames,score,smoothed\n1.0,100,-21,-21\n2.0,200,-20,-20.98\n"
    (tmp_path / "scores.csv").write_text(text)
    elsewhere = tracker_at(tmp_path)
    elsewhere.restore(tracker_at(tmp_path / "other").stats(), 0)  # not its own logs
    elsewhere.close()
    assert (tmp_path / "scores.csv").read_text() == text
    older = tracker_at(tmp_path)
    stats = tracker_at(tmp_path / "older").stats()
    del stats["scores_bytes"]  # checkpoints before the field
    older.restore(stats, 0, own_logs=True)
    older.close()
    assert (tmp_path / "scores.csv").read_text() == text


def through_a_checkpoint(stats: dict) -> dict:
    """``stats`` as a resume reads them back: torch.save, then a weights_only load."""
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(stats, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def test_a_resume_keeps_everything_the_summary_tells_of_the_runs_past(tmp_path):
    from atari_speed.run.tracking import Record

    first = tracker_at(tmp_path / "first", stop_reward=-20.5)
    first.note_choices(why=["auto: 8 envs"], actor_pids=[7])
    first.start -= 100.0  # the clock moves on by 100 s: FPS is not over microseconds
    first.cpu_start -= 100.0  # and the process's CPU clock
    first.advance(400)
    first.game(Game(-21.0, 400))
    first.learning_started()
    first.start -= 100.0
    first.advance(600)
    first.game(Game(21.0, 600))  # smoothed -20.16: solved
    began = first.cpu_seconds - 50.0  # the run's CPU time when the first evaluation began
    first.evaluated(-20.8, 800, 60.0, cpu_seconds=5.0, games=[-21.0, -20.6], run_cpu_seconds=began)
    first.evaluated(-20.4, 1000, 90.0)  # the greedy solve
    first.evaluated(-20.45, 1000, 95.0)  # the last greedy score is not the best
    again = tracker_at(tmp_path / "again", stop_reward=-20.5)
    again.restore(through_a_checkpoint(first.stats()), first.frames)
    before, after = first.summary(), again.summary()
    assert before["eval_cpu_share"] == pytest.approx(0.1, rel=1e-2)  # 5 CPU s of ~50
    for key in ("seconds", "fps", "fps_after_warmup"):  # the clock ran on in between
        assert after.pop(key) == pytest.approx(before.pop(key), rel=1e-3), key
    for key in ("cpu_seconds", "eval_cpu_share"):  # and the CPU clock, from ~100 s
        assert after.pop(key) == pytest.approx(before.pop(key), rel=1e-2), key
    # the one thing a resume adds: where it went on
    assert (before.pop("resumed_at_steps"), after.pop("resumed_at_steps")) == ([], [1000])
    assert after == before
    assert after["evaluations"][0] == {
        "steps": 800,
        "seconds": 60.0,
        "reward": -20.8,
        "cpu_seconds": 5.0,
        "run_cpu_seconds": round(began, 2),
        "games": [-21.0, -20.6],
        "average": False,
    }
    assert after["last_reward"] == 21.0 and after["eval_reward"] == -20.45
    assert after["choices"] == {"why": ["auto: 8 envs"], "actor_pids": [7]}
    # The test sets every field of the record: a field added to Record without a line
    # here fails, rather than goes untested.
    unset = Record(Scores(-20.5))
    for f in dataclasses.fields(Record):
        assert getattr(again.record, f.name) != getattr(unset, f.name), f.name
    for f in dataclasses.fields(Scores):
        if f.name != "stop_reward":
            assert getattr(again.record.scores, f.name) != getattr(unset.scores, f.name), f.name
    first.close()
    again.close()


def test_a_checkpoint_from_before_the_record_still_resumes_what_it_carried(tmp_path):
    old = {
        "episodes": 3,
        "smoothed": -20.5,
        "best_smoothed": -20.0,
        "best_eval": -19.0,
        "eval_solved_at": [30.0, 900],
        "seconds": 40.0,
        "reached": {"-15": [20.0, 600]},
        "scores_bytes": 0,
    }
    tracker = tracker_at(tmp_path, stop_reward=-15.0)
    tracker.restore(old, 1000)
    s = tracker.summary()
    assert (s["episodes"], s["avg_reward"], s["best_avg_reward"]) == (3, -20.5, -20.0)
    assert s["best_eval_reward"] == -19.0 and s["eval_solved_at_steps"] == 900
    assert s["solved"] and s["solved_at_steps"] == 600 and s["seconds"] >= 40.0
    tracker.close()


def test_the_summary_counts_agent_steps_as_steps_and_says_the_emulator_frames(tmp_path):
    tracker = tracker_at(tmp_path, stop_reward=-20.5)
    tracker.plan = dataclasses.replace(
        tracker.plan, pipeline={"stages": [{"wrapper": "MaxAndSkip", "skip": 4}]}
    )
    tracker.advance(600)
    tracker.game(Game(21.0, 600))  # solved at once
    tracker.evaluated(-20.0, 600, 10.0)
    s = tracker.summary()
    assert (s["steps"], s["emulator_frames"]) == (600, 2400)
    assert s["solved_at_steps"] == 600 and s["eval_solved_at_steps"] == 600
    assert s["reached"]["-20.5"]["steps"] == 600 and s["evaluations"][0]["steps"] == 600
    assert "frames" not in s and not any("frames" in k for e in s["evaluations"] for k in e)
    assert (tmp_path / "scores.csv").read_text().startswith("seconds,steps,score,smoothed\n")
    tracker.close()


def test_a_summary_of_an_earlier_version_is_read_under_its_old_keys():
    from atari_speed.run.tracking import summary_steps

    old = {"frames": 900, "solved_at_frames": 800, "reached": {"18": {"frames": 800}}}
    new = {"steps": 900, "solved_at_steps": 800, "reached": {"18": {"steps": 800}}}
    for summary in (old, new):
        assert summary_steps(summary) == 900
        assert summary_steps(summary, "solved_at_steps") == 800
        assert summary_steps(summary["reached"]["18"]) == 800
        assert summary_steps(summary, "eval_solved_at_steps") is None
    # the new key wins where a file has both
    assert summary_steps({"steps": 5, "frames": 4}) == 5


def test_a_resumed_record_of_an_earlier_version_says_steps_for_its_evaluations():
    from atari_speed.run.tracking import Record

    data = dataclasses.asdict(Record(Scores(18.0)))
    data["evaluations"] = [{"frames": 800, "seconds": 6.0, "reward": -20.0, "cpu_seconds": 1}]
    record = Record.from_dict(data)
    assert record.evaluations == [{"steps": 800, "seconds": 6.0, "reward": -20.0, "cpu_seconds": 1}]


def test_a_resume_that_fails_before_playing_leaves_its_directory_as_it_found_it(tmp_path):
    first = tracker_at(tmp_path)
    for frames, score in ((100, -21), (200, -20), (300, -19)):
        first.advance(100)
        first.game(Game(score, 50))
        first.log(epsilon=0.5, loss=None, buffer_fill=1.0)
        if frames == 200:
            stats = first.stats()  # what a checkpoint at 200 frames holds
    first.close()
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert "scores.csv" in files and "summary.json" in files
    # A resume whose envs then fail to start (a missing ROM, a full disk, a bad --set):
    # its loop notes its choices, finish() checkpoints and closes; not one frame played.
    failed = tracker_at(tmp_path)
    failed.restore(stats, 200, own_logs=True)
    failed.note_choices(replay_restored=0)
    failed.log(epsilon=0.5, loss=None, buffer_fill=1.0)
    checkpoint = failed.stats()
    failed.close()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == files
    # Its checkpoint still says where scores.csv stood at 200 frames, not where it ends.
    assert checkpoint["scores_bytes"] == stats["scores_bytes"]
    # The next resume plays, and only then are the rows past 200 frames dropped.
    resumed = tracker_at(tmp_path)
    resumed.restore(checkpoint, 200, own_logs=True)
    assert (tmp_path / "scores.csv").read_bytes() == files["scores.csv"]
    resumed.advance(50)
    rows = (tmp_path / "scores.csv").read_text().splitlines()
    assert [row.split(",")[1] for row in rows[1:]] == ["100", "200"]
    resumed.close()


def test_a_final_evaluation_is_no_greedy_solve_during_the_run(tmp_path):
    # eval.at_end's evaluation comes once the run has ended: at 18 it is best, not the
    # greedy agent's solve, which an evaluation during the run would have been
    tracker = tracker_at(tmp_path, stop_reward=18.0)
    try:
        assert tracker.evaluated(20.0, 700_000, 600.0, games=[20.0], final=True)
        summary = tracker.summary()
        assert summary["eval_solved_at_steps"] is None and summary["best_eval_reward"] == 20.0
        assert summary["evaluations"][0]["final"] is True
    finally:
        tracker.close()


def test_a_resume_with_another_stop_reward_judges_the_past_by_it(tmp_path):
    """A run solved at 18 and resumed with run.stop_reward 20 trains on to 20 (it stopped
    at once, solved, before); lowered, it is solved when it first reached a recorded level
    at or above the new one."""
    first = tracker_at(tmp_path / "first", stop_reward=18.0)
    seconds = 0.0
    while first.scores.solved_at is None:
        seconds += 10.0
        first.scores.add(Game(21.0 if seconds > 10 else -21.0, 900), seconds, int(seconds * 100))
    first.evaluated(17.0, 1_000, 5.0, at_most=True)
    first.evaluated(18.5, 2_000, 15.0)
    first.evaluated(20.5, 3_000, 25.0)
    first.frames = int(seconds * 100)
    stats = first.stats()
    solved_18 = first.scores.solved_at

    same = tracker_at(tmp_path / "same", stop_reward=18.0)
    same.restore(stats, first.frames)
    assert same.scores.solved_at == solved_18
    assert same.record.eval_solved_at[1] == 2_000

    higher = tracker_at(tmp_path / "higher", stop_reward=20.0)
    higher.restore(stats, first.frames)
    assert higher.scores.solved_at is None, "not solved at 20: the resumed run trains on"
    assert higher.summary()["solved"] is False
    assert higher.record.eval_solved_at == (25.0, 3_000), "the evaluation that played 20.5"
    while higher.scores.solved_at is None:
        seconds += 10.0
        higher.scores.add(Game(21.0, 900), seconds, int(seconds * 100))
    assert higher.scores.reached["20"] == higher.scores.solved_at
    assert higher.scores.reached["18"] == solved_18, "the past's milestones stay"

    lower = tracker_at(tmp_path / "lower", stop_reward=10.0)
    lower.restore(stats, first.frames)
    assert lower.scores.solved_at == solved_18, "the first recorded level at or above 10"
    assert lower.record.eval_solved_at[1] == 2_000, "the first evaluation at 10 or more"
    for tracker in (first, same, higher, lower):
        tracker.close()
