"""n-env mode: the one actor in this process, stepping N envs, alternating with updates."""

from __future__ import annotations

from atari_speed.agent.actor import Actor
from atari_speed.agent.replay import FrameReplay
from atari_speed.run.session import Run


def run_nenv(run: Run) -> None:
    """Step all envs once (one batched forward pass), make the updates that are due, and
    do the periodic chores; until the run is done. The replay is restored from a resumed
    run's replay.npz and saved on the way out."""
    prof = run.prof
    venv = run.vector_env()
    try:
        replay = run.new_replay(venv.num_envs)
        # The run's RNG explores too (as it samples): one stream, saved in checkpoints.
        actor = run.new_actor(venv, replay)
        run.start_actor(actor)
        with run.keep_replay(replay):
            _loop(run, actor, replay)
    finally:
        prof.stop()
        if prof.enabled:
            run.profiles.update(venv.worker_profiles())
        venv.close()


def _loop(run: Run, actor: Actor, replay: FrameReplay) -> None:
    prof, size = run.prof, run.preset.replay.size
    collected = 0  # transitions this run added to its replay (beside any restored)
    prof.restart()
    while not run.done:
        games = actor.step(run.env_epsilons(actor.num_envs))
        collected += actor.num_envs
        with prof.section("logging + checkpoints"):
            run.tracker.advance(actor.num_envs)
            for game in games:
                run.game(game)
        for _ in range(run.updates_due(collected)):
            run.learn(replay)
        with prof.section("logging + checkpoints"):
            run.periodic(len(replay) / size)
