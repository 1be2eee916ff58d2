"""Auto configuration: the choice follows the measurements, and says why."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest

from atari_speed.app import auto
from atari_speed.app.auto import Machine, choose, needs_choice
from atari_speed.core.config import ConfigError, load_preset
from tests.scripts import train_here

# maxpool84 starts games as ALE does, so the ale backend plays it as the others do.
AUTO = ["run.mode='auto'", "run.envs='auto'", "env.backend='auto'", "env.pipeline='maxpool84'"]


def machine(cores=2, gpu=None, update_ms=30.0, **steps) -> Machine:
    return Machine(
        cores=cores,
        memory_gb=24,
        gpu=gpu,
        env_steps=steps or {"sync": 1500.0, "subprocess": 3000.0, "ale": 3800.0},
        update_ms=update_ms,
    )


def test_auto_values_parse_from_files_and_flags():
    preset = load_preset("pong-nenv", AUTO)
    assert (preset.run.mode, preset.run.envs, preset.env.backend) == ("auto", 0, "auto")
    assert needs_choice(preset) and not needs_choice(load_preset("pong-nenv"))


def test_cpu_with_an_expensive_learner_gets_n_env_on_the_fastest_backend():
    chosen, choices = choose(load_preset("pong-nenv", AUTO), machine(cores=2))
    assert (chosen.run.mode, chosen.run.envs, chosen.env.backend) == ("n-env", 8, "ale")
    assert choices["backend"] == "ale" and len(choices["why"]) == 3
    assert "fastest" in choices["why"][0] and "SGD step" in choices["why"][1]


@pytest.mark.parametrize(
    ("subprocess", "expected"), [(3800.0 * 1.15, "ale"), (3800.0 * 1.25, "subprocess")]
)
def test_ale_is_kept_unless_another_backend_steps_clearly_faster(subprocess, expected):
    m = machine(cores=2, sync=1500.0, subprocess=subprocess, ale=3800.0)
    chosen, choices = choose(load_preset("pong-nenv", AUTO), m)
    assert chosen.env.backend == expected
    if expected == "ale":
        assert choices["why"][0].startswith("env backend ale: ale unless another steps 1.2x")


def test_many_cores_and_costly_envs_get_parallel_with_a_core_for_the_actor():
    m = machine(cores=8, update_ms=2.0, sync=400.0, ale=500.0)
    chosen, choices = choose(load_preset("pong-nenv", AUTO), m)
    assert chosen.run.mode == "parallel" and chosen.run.learner_threads == 7
    assert chosen.env.backend == "ale" and "can overlap them" in choices["why"][1]


def test_epsilon_that_follows_the_score_keeps_auto_off_parallel_mode():
    m = machine(cores=8, update_ms=2.0, sync=400.0, ale=500.0)  # parallel, as above
    preset = load_preset("pong-nenv", [*AUTO, "explore.epsilon_at_stop=0.0"])
    chosen, choices = choose(preset, m)
    assert chosen.run.mode == "n-env" and "epsilon_at_stop" in choices["why"][1]


def test_epsilon_spread_over_the_envs_keeps_auto_off_parallel_mode():
    m = machine(cores=8, update_ms=2.0, sync=400.0, ale=500.0)  # parallel, as above
    chosen, choices = choose(load_preset("pong-nenv", [*AUTO, "explore.env_spread=5"]), m)
    assert chosen.run.mode == "n-env" and "env_spread" in choices["why"][1]


def test_a_gpu_gets_more_envs_and_n_env():
    m = machine(cores=16, gpu="NVIDIA H100", update_ms=2.0)
    chosen, _ = choose(load_preset("pong-nenv", AUTO), m)
    assert (chosen.run.mode, chosen.run.envs) == ("n-env", 16)


def test_fixed_fields_are_kept():
    preset = load_preset("pong-nenv", ["run.mode='auto'"])  # envs 3, backend sync fixed
    chosen, _ = choose(preset, machine())
    assert (chosen.run.mode, chosen.run.envs, chosen.env.backend) == ("n-env", 3, "sync")


def test_no_working_backend_is_a_clear_error():
    m = Machine(cores=2, memory_gb=24, env_steps={}, env_errors={"ale": "boom"}, update_ms=30)
    with pytest.raises(ConfigError, match="no env backend works here: ale: boom"):
        choose(load_preset("pong-nenv", AUTO), m)


def test_check_prints_the_machine_and_the_choice_without_training(tmp_path, monkeypatch):
    # run in tmp_path: nothing may be written, no runs/ directory appears there
    monkeypatch.chdir(tmp_path)
    # each backend's steps timed for 0.2 s, not 1 s: the rates are printed, not asserted
    monkeypatch.setattr(auto, "calibrate", functools.partial(auto.calibrate, seconds=0.2))
    out = train_here("--preset", "pong-fast", "--check")
    assert out.returncode == 0, out.stderr
    for text in ("cores:", "memory:", "gpu:", "torch threads:", "env backend ale: works"):
        assert text in out.stdout, text
    assert "one SGD update" in out.stdout and "auto would choose: mode" in out.stdout
    assert list(tmp_path.iterdir()) == []


def test_parallel_never_gets_the_subprocess_backend():
    # actors are daemonic processes: they cannot start env worker processes of their own
    m = machine(cores=2, sync=1000.0, subprocess=5000.0, ale=3000.0)
    preset = load_preset("pong-nenv", ["run.mode='parallel'", *AUTO[2:]])
    chosen, _ = choose(preset, m)
    assert chosen.env.backend == "ale"


def test_ale_is_not_chosen_where_it_would_start_games_at_another_frame():
    # The book pipeline has FireReset, which ALE cannot play: its one-frame FIRE would
    # train an agent on another frame phase than play.py shows it.
    chosen, choices = choose(load_preset("pong-nenv", AUTO[:3]), machine(cores=2))
    assert chosen.env.backend == "subprocess"  # the fastest of the rest
    assert (
        "env backend ale: not chosen: pipeline 'book' on the ale backend: stage 3 "
        "(FireReset): ALE cannot press FIRE" in choices["why"][1]
    )


@pytest.mark.parametrize(
    ("fp32", "bf16", "expected"), [(20.0, 11.0, "bf16"), (20.0, 19.0, "fp32"), (20.0, 60.0, "fp32")]
)
def test_precision_auto_takes_bf16_only_where_it_measured_faster(fp32, bf16, expected):
    m = machine()
    m.update_ms, m.update_ms_bf16 = fp32, bf16
    m.cpu, m.cpu_bf16 = "Some CPU", ["avx512_bf16"]
    preset = load_preset("pong-pqn", ["run.precision='auto'"])
    assert needs_choice(preset)
    chosen, choices = choose(preset, m)
    assert chosen.run.precision == expected == choices["precision"]
    assert f"precision {expected}: one update took {bf16:.1f} ms in bf16" in choices["why"][-1]
    assert "Some CPU (bf16 units: avx512_bf16)" in choices["why"][-1]
    assert choices["machine"]["cpu"] == "Some CPU"


def test_pqn_runs_in_n_env_mode_and_says_what_share_envs_take():
    # pong-pqn: 64 envs x 32 steps, 2 epochs x 8 minibatches: SGD per frame is
    # update_ms x 16 / 2048; env per frame is 1 / steps per second
    preset = load_preset("pong-pqn", ["run.mode='auto'"])  # backend ale, fixed
    chosen, choices = choose(preset, machine(cores=2, update_ms=20.0, ale=5000.0))
    assert chosen.run.mode == "n-env" and chosen.run.learner_threads == 0
    assert "envs take 56% of a frame (0.20 ms env vs 0.16 ms SGD) on 2" in choices["why"][0]
    # the update that counts is the one in the precision chosen
    m = machine(cores=2, update_ms=200.0, ale=5000.0)
    m.update_ms_bf16 = 20.0
    chosen, choices = choose(
        load_preset("pong-pqn", ["run.mode='auto'", "run.precision='auto'"]), m
    )
    assert chosen.run.precision == "bf16" and "envs take 56%" in choices["why"][0]
    m = machine(cores=16, gpu="NVIDIA H100", update_ms=1.0, ale=5000.0)
    chosen, choices = choose(load_preset("pong-pqn", ["run.mode='auto'"]), m)
    assert chosen.run.mode == "n-env" and "on the GPU" in choices["why"][0]


def test_pqn_auto_width_is_read_from_pong_fast():
    # one source: the width auto gives PQN is presets/pong-fast.toml's run.envs
    preset = load_preset("pong-pqn", ["run.envs='auto'"])
    chosen, choices = choose(preset, machine())
    assert chosen.run.envs == load_preset("pong-fast").run.envs
    assert f"{chosen.run.envs} envs: PQN's rollout width" in " ".join(choices["why"])


@pytest.mark.parametrize("name", ["pong-fast", "pong-pqn"])
def test_check_calibrates_the_preset_s_own_minibatch(monkeypatch, capsys, name):
    # --check shows auto's choice for every field, but the SGD update it times must be the
    # one the preset runs: PQN's minibatch is run.envs x pqn.rollout / pqn.minibatches
    from atari_speed.app import auto
    from atari_speed.app.cli import check_main

    timed = []

    def fake_calibrate(m, preset, seconds=1.0):
        timed.append(preset)
        m.env_steps, m.update_ms, m.update_ms_bf16 = {"ale": 3000.0}, 20.0, 30.0
        return m

    monkeypatch.setattr(auto, "calibrate", fake_calibrate)
    monkeypatch.setattr(auto, "detect", lambda: Machine(cores=2, memory_gb=24))
    assert check_main(name, []) == 0
    own, probe = load_preset(name), timed[0]
    minibatch = probe.run.envs * probe.pqn.rollout // probe.pqn.minibatches
    assert minibatch == own.run.envs * own.pqn.rollout // own.pqn.minibatches
    assert "auto would choose" in capsys.readouterr().out


def test_a_busy_moment_slows_both_precisions_alike(monkeypatch):
    # The machine is busy for the first 6 updates timed, then idle; both precisions cost
    # the same. Timed one precision after the other, fp32 would take the busy updates and
    # bf16 would look 5x faster; taking turns, both see the busy moment alike.
    import atari_speed.agent.learning as learning

    calls, clock = [0], [0.0]

    class Learner:
        def step(self, *args):
            calls[0] += 1
            # the update's time passes on a clock of the test's own: a loaded machine's
            # oversleep would tip a real sleep past choose_precision's 10% margin
            clock[0] += 0.100 if calls[0] <= 6 else 0.020

    monkeypatch.setattr(learning, "make_learner", lambda *a, **k: Learner())
    monkeypatch.setattr(auto, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    preset = load_preset("pong-fast")
    fp32, bf16 = auto._update_ms(preset, (4, 42, 42), 6, (False, True), envs=8)
    assert calls[0] == 12
    assert abs(fp32 - bf16) < 0.5 * min(fp32, bf16)
    machine = auto.Machine(cores=2, memory_gb=24.0, update_ms=fp32, update_ms_bf16=bf16)
    assert auto.choose_precision(preset, machine)[0] == "fp32"
