"""Choosing actions with a Q-network: greedy, epsilon-greedy, and whole games of play."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from atari_speed.envs.wrappers import NEW_GAME


@torch.no_grad()
def greedy_and_values(
    net: nn.Module, obs: np.ndarray, device: torch.device, bf16: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """argmax_a and max_a Q(s, a) of all envs' observations ``(N, k, H, W)`` uint8, from one
    batched forward pass; ``bf16`` autocasts it (run.act_bf16)."""
    x = torch.from_numpy(np.asarray(obs)).to(device, non_blocking=True)
    # autocast only when asked: it refuses device types it does not know, even disabled
    cast = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else nullcontext()
    with cast:
        q = net(x)
    best = q.float().max(dim=1)  # ties: the first maximal index, as argmax
    return best.indices.cpu().numpy(), best.values.cpu().numpy()


def epsilon_greedy(
    greedy: np.ndarray, epsilon: float | np.ndarray, actions: int, rng: np.random.Generator
) -> np.ndarray:
    """Replace each greedy action by a random one with probability ``epsilon``."""
    explore = rng.random(len(greedy)) < epsilon
    return np.where(explore, rng.integers(0, actions, len(greedy)), greedy)


def act(
    net: nn.Module,
    obs: np.ndarray,
    epsilon: float | np.ndarray,
    actions: int,
    rng: np.random.Generator,
    device: torch.device,
    bf16: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Epsilon-greedy actions for a batch of observations ``(N, k, H, W)``, and max_a Q(s, a)
    of each from the same forward pass (under bf16 autocast with ``bf16``); while epsilon is
    1 (warm-up) every action is random, so the forward pass is skipped and there are no
    values (None). ``epsilon``: one for all, or each observation's."""
    if np.min(epsilon) >= 1.0:
        return rng.integers(0, actions, len(obs)), None
    greedy, values = greedy_and_values(net, obs, device, bf16)
    return epsilon_greedy(greedy, epsilon, actions, rng), values


def play_episodes(
    env: gym.Env,
    net: nn.Module,
    device: torch.device,
    games: int,
    epsilon: float,
    rng: np.random.Generator,
    stop: threading.Event | None = None,
    on_step: Callable[[], bool] | None = None,
    points: bool = False,
) -> list[dict[str, Any]]:
    """Play whole games; return each game's ``info["episode"]`` (unclipped score ``r``,
    agent steps ``l``, emulator ``frames``), with ``points``: also each reward's agent steps
    after the one before, signed as the reward (``points``; -126: a point lost 126 steps
    after the last). ``stop`` ends play early. ``on_step`` is called after the first reset
    and after every step (``play.py`` shows and records the screen); returning False ends
    play early. Either way the game in progress is not returned."""
    finished: list[dict[str, Any]] = []
    scored: list[int] = []
    since = 0
    # a new game even where the env was just reset (seeded): EpisodicLife would take this
    # reset for one after a lost life and go on with that game, one FIRE step in
    obs, _ = env.reset(options={NEW_GAME: True})
    going = on_step is None or on_step()
    while going and len(finished) < games and not (stop is not None and stop.is_set()):
        batch = np.asarray(obs)[None]
        action = int(act(net, batch, epsilon, env.action_space.n, rng, device)[0][0])
        obs, reward, terminated, truncated, info = env.step(action)
        since += 1
        if reward:
            scored.append(since if reward > 0 else -since)
            since = 0
        if "episode" in info:
            finished.append(dict(info["episode"]) | ({"points": scored} if points else {}))
            scored, since = [], 0
        going = on_step is None or on_step()
        if terminated or truncated:
            obs, _ = env.reset()
    return finished
