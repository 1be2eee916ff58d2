"""The `book` pipeline equals the book's own ptan.common.wrappers.wrap_dqn."""

from __future__ import annotations

import ale_py
import gymnasium as gym
import numpy as np
import ptan.common.wrappers

from atari_speed import make_env

gym.register_envs(ale_py)


def test_book_pipeline_equals_ptan_wrap_dqn_for_a_whole_pong_game():
    reference = ptan.common.wrappers.wrap_dqn(gym.make("PongNoFrameskip-v4"))
    ours = make_env("book", "pong")
    obs_ref, _ = reference.reset(seed=0)
    obs, _ = ours.reset(seed=0)
    assert np.array_equal(obs_ref, np.asarray(obs))
    rng = np.random.default_rng(0)
    for step in range(1, 5000):
        action = int(rng.integers(6))
        obs_ref, reward_ref, term_ref, trunc_ref, _ = reference.step(action)
        obs, reward, term, trunc, info = ours.step(action)
        assert np.array_equal(obs_ref, np.asarray(obs)), f"observation differs at step {step}"
        assert (reward, term, trunc) == (reward_ref, term_ref, trunc_ref), f"step {step}"
        if term_ref:
            break
    assert term, "a game of Pong with random actions ends within 5000 steps"
    assert info["episode"]["l"] == step and info["episode"]["r"] <= -15
