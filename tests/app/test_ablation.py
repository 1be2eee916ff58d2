"""Ablation presets: variants checked up front, each trained, one table, overlaid logs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from atari_speed.app.ablation import (
    SCORE_COLUMNS,
    check_envs,
    markdown,
    read_scores,
    row,
    with_deltas,
)
from atari_speed.core.config import ConfigError, load_preset, load_variants
from tests.scripts import run_script, train_here

PRESETS = Path(__file__).parents[2] / "presets"
SHIPPED = [
    "wrapper-ablation",
    "image-backend-ablation",
    "mode-ablation",
    "book-table",
    "pong-fast-algos",
    "pong-fast-levers",
]

TWO_VARIANTS = """
[run]
mode = "n-env"
envs = 2
steps = 200
log_every = 50
[env]
pipeline = "book"
[dqn]
network = "nips"
batch_size = 16
train_every = 2
target_sync = 50
[replay]
size = 1000
initial = 50

[[variant]]
name = "opencv, 2 envs"

[[variant]]
name = "numpy, 1 env"
env.image_backend = "numpy"
run.envs = 1
"""


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_ablation_presets_load_every_variant(name):
    variants = load_variants(name)
    assert len(variants) >= 3  # image-backend-ablation's three resize backends, the fewest
    assert len({label for label, _ in variants}) == len(variants)


def test_command_line_overrides_apply_to_every_variant():
    variants = load_variants("mode-ablation", ["run.steps=1234", "dqn.learning_rate=3e-4"])
    assert {p.run.steps for _, p in variants} == {1234}
    assert {p.dqn.learning_rate for _, p in variants} == {3e-4}
    assert [p.run.envs for _, p in variants][1:5] == [1, 2, 4, 8]  # the variants' own


@pytest.mark.parametrize(
    "body, message",
    [
        ("[[variant]]\nrun.envs = 2\n", "variant 1 needs a name"),
        ('[[variant]]\nname = "a"\n[[variant]]\nname = "a"\n', "variant 2: name 'a' is used twice"),
        ('[[variant]]\nname = "x"\nrun.envz = 2\n', "variant 1 (x): [run] unknown key 'envz'"),
        (
            '[[variant]]\nname = "x"\ndqn.gamma = 2.0\n',
            "variant 1 (x): [dqn]: gamma = 2.0 is out of range",
        ),
    ],
)
def test_bad_variants_are_refused_before_anything_trains(tmp_path, body, message):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    with pytest.raises(ConfigError) as err:
        load_variants(path)
    assert message in str(err.value) and str(path) in str(err.value)


@pytest.mark.parametrize("name", sorted(p.stem for p in PRESETS.glob("*.toml")))
def test_every_shipped_preset_and_variant_can_build_its_envs(name):
    # raises, naming the variant, for a pipeline that does not read or fit its backend
    check_envs(load_variants(name) or [(name, load_preset(name))])


def test_a_variant_the_ale_backend_cannot_play_is_refused_before_the_first_trains(tmp_path):
    # The book pipeline starts games with FireReset, which ALE cannot press: asked for by
    # name, the ale backend would fail when variant 2's envs are built, after variant 1.
    path = tmp_path / "late.toml"
    path.write_text(
        TWO_VARIANTS.replace('name = "numpy, 1 env"', 'name = "on ale"\nenv.backend = "ale"')
    )
    with pytest.raises(ConfigError, match=r"variant 'on ale': pipeline 'book' on the ale backend"):
        check_envs(load_variants(path))
    out = train_here("--preset", str(path), "--run-dir", str(tmp_path / "runs"))
    assert out.returncode == 2 and "variant 'on ale'" in out.stderr
    assert not (tmp_path / "runs").exists()  # nothing trained, nothing written
    path.write_text(
        TWO_VARIANTS.replace('name = "numpy, 1 env"', 'name = "bad"\nenv.pipeline = "nope"')
    )
    with pytest.raises(ConfigError, match=r"variant 'bad': .*nope"):
        check_envs(load_variants(path))


def test_table_deltas_are_against_the_first_row():
    rows = with_deltas(
        [
            {
                "variant": "a",
                "fps": 100.0,
                "seconds": 600.0,
                "solved": True,
                "steps_to_solve": 5000,
                "best_avg_reward": 18.2,
                "interrupted": False,
                "to_seconds": {"-15": 120.0, "0": 330.0, "18": 600.0},
                "stop_reward": 18.0,
            },
            {
                "variant": "b",
                "fps": 150.0,
                "seconds": 300.0,
                "solved": False,
                "steps_to_solve": None,
                "best_avg_reward": None,
                "interrupted": False,
            },
        ]
    )
    assert rows[1]["delta_fps"] == pytest.approx(50.0)
    assert rows[1]["delta_seconds"] == pytest.approx(-50.0)
    text = markdown("t", rows)
    assert (
        "| a | 100.0 | +0.0% | 10.0 min | +0.0% | 5,000 | 2.0 min | 5.5 min | 10.0 min | 18.2 |"
        in text
    )
    assert "| b | 150.0 | +50.0% | 5.0 min (budget, not solved) | -50.0% |  |  |  |  |  |" in text


@pytest.mark.parametrize("steps", ["steps", "frames"], ids=["steps", "earlier frames"])
def test_a_row_reads_a_summary_of_this_version_or_an_earlier_one(steps):
    # runs/ of earlier versions said frames (and solved_at_frames) for agent steps
    summary = {
        steps: 900,
        f"solved_at_{steps}": 800,
        "solved": True,
        "fps": 10.0,
        "seconds": 90.0,
        "solved_at_seconds": 80.0,
        "best_avg_reward": 18.1,
        "reached": {"18": {"seconds": 80.0, steps: 800}},
        "preset": {"run": {"stop_reward": 18.0}},
    }
    r = row("a", Path("runs/a"), summary)
    assert (r["steps"], r["steps_to_solve"], r["seconds"]) == (900, 800, 80.0)
    assert "| a | 10.0 | +0.0% | 1.3 min | +0.0% | 800 |" in markdown("t", with_deltas([r]))


def test_two_variant_ablation_end_to_end(tmp_path):
    preset = tmp_path / "tiny-ablation.toml"
    preset.write_text(TWO_VARIANTS)
    parent = tmp_path / "out"
    out = train_here("--preset", str(preset), "--run-dir", str(parent), "--set", "run.seed=3")
    assert out.returncode == 0, out.stderr
    rows = json.loads((parent / "ablation.json").read_text())["rows"]
    assert [r["variant"] for r in rows] == ["opencv, 2 envs", "numpy, 1 env"]
    assert all(r["steps"] == 200 and r["fps"] > 0 for r in rows)
    assert rows[0]["delta_fps"] == 0.0 and rows[1]["delta_fps"] is not None
    table = (parent / "ablation.md").read_text()
    assert "| opencv, 2 envs |" in table and "| numpy, 1 env |" in table
    assert "| numpy, 1 env |" in out.stdout
    for png in ("ablation.png", "ablation-curves.png"):
        assert (parent / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    dirs = [parent / "01-opencv-2-envs", parent / "02-numpy-1-env"]
    tags = [set(EventAccumulator(str(d)).Reload().Tags()["scalars"]) for d in dirs]
    assert tags[0] == tags[1] and "train/fps" in tags[0]  # same tags: TensorBoard overlays
    summaries = [json.loads((d / "summary.json").read_text()) for d in dirs]
    assert summaries[1]["pipeline"]["stages"][3]["backend"] == "numpy"
    assert summaries[0]["preset"]["run"]["seed"] == summaries[1]["preset"]["run"]["seed"] == 3


TINY_PQN = ["--preset", "pong-pqn", "--envs", "2", "--frames", "64"]
TINY_PQN += ["--set", "pqn.rollout=8", "--set", "pqn.minibatches=2"]


def test_seeds_train_the_preset_once_per_seed_with_one_table(tmp_path):
    out = train_here(*TINY_PQN, "--seeds", "3,4", "--run-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    rows = json.loads((tmp_path / "ablation.json").read_text())["rows"]
    assert [r["variant"] for r in rows] == ["seed 3", "seed 4"]
    for r, seed in zip(rows, (3, 4), strict=True):
        summary = json.loads((tmp_path / r["run_dir"].split("/")[-1] / "summary.json").read_text())
        assert summary["preset"]["run"]["seed"] == seed and summary["steps"] == 64


@pytest.mark.ray
def test_seeds_at_once_as_ray_tasks_each_on_its_own_core(tmp_path):
    args = [*TINY_PQN, "--seeds", "0,1", "--concurrent", "--run-dir", str(tmp_path)]
    out = run_script("train.py", *args, timeout=300, fresh=True)
    assert out.returncode == 0, out.stderr
    table = json.loads((tmp_path / "ablation.json").read_text())
    assert table["title"] == "pong-pqn: 2 variants, at once"
    assert [r["variant"] for r in table["rows"]] == ["seed 0", "seed 1"]
    share = max(1, len(os.sched_getaffinity(0)) // 2)
    assert out.stdout.count("(cores [") == 2
    for r in table["rows"]:
        summary = json.loads((Path(r["run_dir"]) / "summary.json").read_text())
        assert summary["steps"] == 64 and summary["torch_threads"] == share


def test_read_scores_gives_one_row_a_game_in_the_file_columns(tmp_path):
    # the one reader of scores.csv that plots, atari5.py and solve_report.py share: a
    # header alone is no game (not a warning and a 1-column array), and columns stay put
    (tmp_path / "scores.csv").write_text(",".join(SCORE_COLUMNS) + "\n")
    assert read_scores(tmp_path).shape == (0, 4)
    with (tmp_path / "scores.csv").open("a") as f:
        f.write("1.5,128,-21,-21.0\n2.5,384,-19,-20.96\n")
    assert read_scores(tmp_path).tolist() == [[1.5, 128, -21, -21.0], [2.5, 384, -19, -20.96]]
    with (tmp_path / "scores.csv").open("a") as f:
        f.write("3.5,640,")  # a run killed as it wrote its next line
    assert read_scores(tmp_path).tolist() == [[1.5, 128, -21, -21.0], [2.5, 384, -19, -20.96]]
