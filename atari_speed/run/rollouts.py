"""PQN in n-env mode: the one actor fills a rollout of N envs x T steps in this process,
then the learner trains on it and drops it."""

from __future__ import annotations

from atari_speed.agent.rollout import RolloutStore
from atari_speed.run.session import Run


def run_pqn(run: Run) -> None:
    """Collect a rollout (one batched forward pass a step), learn on it, do the periodic
    chores; until the run is done."""
    plan, preset, prof = run.plan, run.preset, run.prof
    venv = run.vector_env()
    try:
        rollout = RolloutStore(venv.num_envs, preset.pqn.rollout, plan.obs_shape)
        actor = run.new_actor(venv, rollout)
        run.start_actor(actor)
        prof.restart()
        while not run.done:
            rollout.clear()
            while not rollout.full:
                games = actor.step(run.env_epsilons(actor.num_envs))
                with prof.section("logging + checkpoints"):
                    run.tracker.advance(actor.num_envs)
                    for game in games:
                        run.game(game)
            rollout.finish(actor.obs)
            run.learn(rollout)
            with prof.section("logging + checkpoints"):
                run.periodic(buffer_fill=1.0)
    finally:
        prof.stop()
        if prof.enabled:
            run.profiles.update(venv.worker_profiles())
        venv.close()
