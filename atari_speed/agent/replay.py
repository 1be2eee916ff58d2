"""Replay buffer for N env streams that stores each frame once.

The buffer is a ring of ``rows`` steps for each of N env columns. Row t of column e
holds the *newest frame* of observation o_t, the action a_t, reward r_t, and whether the
episode ended after a_t. A 4-frame state is rebuilt at sample time from rows t-3..t of the
same column, with zeros for frames before the episode's first row (exactly what
``FrameStack`` shows the agent). So 1M transitions of Pong take 1M x 84 x 84 bytes
(7.06 GB) instead of the 8 frames per transition of a list of (state, next_state) pairs.

Why columns: each env's history stays contiguous, so stacking and n-step look-ahead are
plain index arithmetic, and several writers (actors, each owning some columns) never touch
the same memory. Writing is two-phase, ``put_obs`` then ``commit``: a row becomes visible to
``sample`` only after it is complete, which is what makes the shared-memory version safe
to read while actors write.

Episode ends stop the n-step return. A terminated episode is not bootstrapped; a truncated
one (ALE's 108k-frame limit, or play.py's cap) bootstraps from its final observation, as
gymnasium's API intends: ``commit`` then writes that observation's newest frame into an
extra *tail* row, which continues the episode's stack but is never itself a transition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from atari_speed.core.shm import Layout, arrays_over, layout_nbytes

# The arrays a saved replay holds (not pending_first: a restored replay starts new games).
ARRAYS = ("frames", "actions", "rewards", "ends", "terminal", "tail", "first", "written")
MAX_REDRAWS = 100  # tail rows are ~1 in 27k: redrawing them never takes more than a few
# Rows at the old end of each column's ring that are never sampled: a writer in another
# process may be overwriting them (put_obs writes the oldest row, a tail the next) while
# the learner gathers a batch from a snapshot of ``written``.
MARGIN = 4


@dataclass
class Batch:
    """Sampled n-step transitions, as the learner takes them.

    The TD target of transition i is ``returns[i] + discounts[i] * max_a Q(next_states[i])``:
    ``discounts`` is gamma to the number of steps summed, or 0 where the episode terminated
    within them. ``env`` and ``step`` say where each came from (replay column and absolute
    row), where known.
    """

    states: np.ndarray  # (B, k*C, H, W) uint8
    next_states: np.ndarray  # (B, k*C, H, W) uint8
    actions: np.ndarray  # (B,) int64
    returns: np.ndarray  # (B,) float32: discounted sum of the n rewards (fewer at an end)
    discounts: np.ndarray  # (B,) float32: bootstrap factor of next_states
    env: np.ndarray | None = None
    step: np.ndarray | None = None

    @classmethod
    def empty(cls, size: int, state_shape: tuple[int, ...]) -> Batch:
        return cls(
            states=np.empty((size, *state_shape), np.uint8),
            next_states=np.empty((size, *state_shape), np.uint8),
            actions=np.empty(size, np.int64),
            returns=np.empty(size, np.float32),
            discounts=np.empty(size, np.float32),
        )


class FrameReplay:
    """``capacity`` transitions over ``num_envs`` columns of ``capacity // num_envs`` rows.

    ``frame_shape`` is one frame, ``(C, H, W)``; states are ``k`` frames, ``(k*C, H, W)``.
    ``buffer`` is where the arrays live (a SharedMemory block's ``buf``, say); a new one is
    allocated if None. ``attach`` means the buffer already holds a replay being written:
    it is read as it is, not initialised.
    """

    def __init__(
        self,
        capacity: int,
        num_envs: int,
        frame_shape: tuple[int, ...],
        k: int,
        n_steps: int = 1,
        gamma: float = 0.99,
        buffer: Any = None,
        attach: bool = False,
    ) -> None:
        self.num_envs, self.k, self.n_steps, self.gamma = num_envs, k, n_steps, gamma
        self.capacity = capacity
        self.rows = self.rows_for(capacity, num_envs, k, n_steps)
        self.frame_shape = tuple(frame_shape)
        layout = self.layout(capacity, num_envs, frame_shape, k, n_steps)
        if buffer is None:
            buffer = bytearray(layout_nbytes(layout))
        arrays = arrays_over(buffer, layout)
        self.frames = arrays["frames"]
        self.actions = arrays["actions"]
        self.rewards = arrays["rewards"]
        self.ends = arrays["ends"]  # the episode ended after a_t (terminated or truncated)
        self.terminal = arrays["terminal"]  # ... and is not bootstrapped
        self.tail = arrays["tail"]  # a truncated episode's final frame: not a transition
        self.first = arrays["first"]
        # written[e]: rows committed in column e. pending_first[e]: o_t starts an episode.
        self.written = arrays["written"]
        self.pending_first = arrays["pending_first"]
        if not attach:
            self.pending_first[:] = True
        self.discounts = gamma ** np.arange(n_steps, dtype=np.float64)

    @staticmethod
    def rows_for(capacity: int, num_envs: int, k: int, n_steps: int) -> int:
        """Rows per column: enough for one sampleable transition beside the margin."""
        return max(capacity // num_envs, k + n_steps + 2 + MARGIN)

    @classmethod
    def layout(
        cls, capacity: int, num_envs: int, frame_shape: tuple[int, ...], k: int, n_steps: int
    ) -> Layout:
        grid = (cls.rows_for(capacity, num_envs, k, n_steps), num_envs)
        return [
            ("frames", grid + tuple(frame_shape), "uint8"),
            ("actions", grid, "int64"),
            ("rewards", grid, "float32"),
            ("ends", grid, "bool"),
            ("terminal", grid, "bool"),
            ("tail", grid, "bool"),
            ("first", grid, "bool"),
            ("written", (num_envs,), "int64"),
            ("pending_first", (num_envs,), "bool"),
        ]

    @classmethod
    def nbytes(
        cls, capacity: int, num_envs: int, frame_shape: tuple[int, ...], k: int, n_steps: int
    ) -> int:
        return layout_nbytes(cls.layout(capacity, num_envs, frame_shape, k, n_steps))

    def __len__(self) -> int:
        """Transitions held (rows written, up to the ring's size)."""
        return int(np.minimum(self.written, self.rows).sum())

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array a saved replay holds, by its layout name."""
        return {name: getattr(self, name) for name in ARRAYS}

    def end_open_episodes(self, cols: slice = slice(None)) -> None:
        """Close every column's game in progress as a truncation at its last row.

        A restored replay (or columns whose actor was replaced) goes on with envs that
        start new games, so the game each column
        was in the middle of ends where the buffer does: its last row becomes that game's
        final frame (a tail row, not itself a transition), the row before it bootstraps
        from it, and the next row written starts a new game. That is what ``commit``
        records for a truncated game; one transition per column is given up.
        """
        for e in np.arange(self.num_envs)[cols]:
            w = int(self.written[e])
            last = (w - 1) % self.rows
            if w == 0 or self.ends[last, e]:  # empty, or its last game already ended
                continue
            if not self.first[last, e] and w >= 2:
                prev = (w - 2) % self.rows
                self.ends[prev, e], self.terminal[prev, e] = True, False
            self.actions[last, e], self.rewards[last, e] = 0, 0.0
            self.ends[last, e] = self.terminal[last, e] = self.tail[last, e] = True
        self.pending_first[cols] = True

    # ------------------------------------------------------------ writing

    def put_obs(
        self, obs: np.ndarray, cols: slice = slice(None), values: np.ndarray | None = None
    ) -> None:
        """Store the newest frame of each observation o_t (``(n, k*C, H, W)``) of ``cols``.
        The actor's ``values`` are not kept: DQN's targets come from the target network at
        sample time."""
        c = self.frame_shape[0]
        columns = np.arange(self.num_envs)[cols]
        if self.k > 1 and self.pending_first[cols].any():
            self._continue_stacks(obs, columns)
        rows = self.written[cols] % self.rows
        self.frames[rows, columns] = obs[:, -c:]

    def _continue_stacks(self, obs: np.ndarray, columns: np.ndarray) -> None:
        """Where an episode starts but the observation's stack goes on from the last one
        (a lost life with FrameStack's ``keep_across_lives``, and always on the ale
        backend), the new episode's states must be rebuilt from the frames before it, not
        zeros, or learning sees other states than the actor acted on. On ale the frame
        before is the last row's; on the pipeline backends the lost life's final frame
        comes between, and is written here as a tail row (never a transition), as for a
        truncation. A stack that starts afresh (older frames zero) starts with zeros."""
        c = self.frame_shape[0]
        for i in np.flatnonzero(self.pending_first[columns]):
            e, w = columns[i], int(self.written[columns[i]])
            older = obs[i, :-c]
            if w == 0 or not older.any():
                continue
            last = self.frames[(w - 1) % self.rows, e]
            if np.array_equal(obs[i, -2 * c : -c], last):
                self.pending_first[e] = False
            elif self.k > 2 and np.array_equal(obs[i, -3 * c : -2 * c], last):
                at = w % self.rows
                self.frames[at, e] = obs[i, -2 * c : -c]
                self.actions[at, e], self.rewards[at, e] = 0, 0.0
                self.ends[at, e] = self.terminal[at, e] = self.tail[at, e] = True
                self.first[at, e] = False
                self.written[e] += 1  # last: the tail row is complete before it is seen
                self.pending_first[e] = False

    def commit(
        self,
        actions: np.ndarray,
        rewards: np.ndarray,
        terminated: np.ndarray,
        *,
        truncated: np.ndarray | None = None,
        final_obs: np.ndarray | None = None,
        cols: slice = slice(None),
    ) -> None:
        """Complete row t of ``cols`` with a_t, r_t and how the episode ended, making it
        visible to ``sample``. Where ``truncated``, ``final_obs`` (the vector env's
        ``infos["final_obs"]``, all columns of ``cols``) gives the state to bootstrap from;
        without it a truncation is treated as a termination."""
        rows = self.written[cols] % self.rows
        columns = np.arange(self.num_envs)[cols]
        if truncated is None:
            truncated = np.zeros_like(terminated)
        ends = terminated | truncated
        tails = truncated & ~terminated if final_obs is not None else np.zeros_like(ends)
        self.actions[rows, columns] = actions
        self.rewards[rows, columns] = rewards
        self.ends[rows, columns] = ends
        self.terminal[rows, columns] = ends & ~tails
        self.tail[rows, columns] = False
        self.first[rows, columns] = self.pending_first[cols]
        if tails.any():
            c = self.frame_shape[0]
            at, where = (rows[tails] + 1) % self.rows, columns[tails]
            self.frames[at, where] = np.asarray(final_obs)[tails][:, -c:]
            self.actions[at, where], self.rewards[at, where] = 0, 0.0
            self.ends[at, where] = self.terminal[at, where] = self.tail[at, where] = True
            self.first[at, where] = False  # it continues the truncated episode's stack
        self.pending_first[cols] = ends
        self.written[cols] += 1 + tails  # last: rows are complete before anyone samples them

    # ------------------------------------------------------------ sampling

    def sampleable(self) -> tuple[np.ndarray, np.ndarray]:
        """Per column, the lowest and highest absolute row a transition can start at.

        Row j needs rows j-k+1..j (its stack) not yet overwritten, and beyond them MARGIN
        rows that a concurrent writer may be overwriting; and rows up to j+n written (the
        n-step look-ahead and the next state's newest frame).
        """
        written = self.written.copy()
        low = np.maximum(0, written - self.rows + self.k - 1 + MARGIN)
        high = written - 1 - self.n_steps
        return low, high

    def sample(self, batch_size: int, rng: np.random.Generator, out: Batch | None = None) -> Batch:
        """Draw ``batch_size`` n-step transitions uniformly (into ``out``, if given).

        Each return sums up to n rewards, fewer where the episode ended; the next state is
        the state after the last of them: n rows on, or a truncated episode's tail row.
        """
        col, j = self._draw(batch_size, rng)
        if out is None:
            out = Batch.empty(batch_size, (self.k * self.frame_shape[0], *self.frame_shape[1:]))
        n = self.n_steps
        ahead = (j[:, None] + np.arange(n)) % self.rows  # rows j..j+n-1
        ends = self.ends[ahead, col[:, None]]
        # A step counts if no earlier step of the window ended the episode.
        alive = np.concatenate(
            [np.ones((batch_size, 1), bool), ~np.logical_or.accumulate(ends, axis=1)[:, :-1]],
            axis=1,
        )
        rewards = self.rewards[ahead, col[:, None]]
        out.returns[:] = (rewards * alive * self.discounts).sum(axis=1)
        ended = ends.any(axis=1)
        steps = np.where(ended, ends.argmax(axis=1) + 1, n)  # rewards summed
        terminal = ended & self.terminal[(j + steps - 1) % self.rows, col]
        out.discounts[:] = np.where(terminal, 0.0, self.gamma**steps)
        out.actions[:] = self.actions[j % self.rows, col]
        out.env, out.step = col, j
        self._stack(j, col, out.states)
        self._stack(j + steps, col, out.next_states)
        return out

    def _draw(self, batch_size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Columns and absolute rows of ``batch_size`` uniform draws of a transition start."""
        low, high = self.sampleable()
        counts = np.maximum(high - low + 1, 0)
        total = int(counts.sum())
        if total <= 0:
            raise ValueError("the replay buffer holds no complete transition yet")
        cum = np.cumsum(counts)
        col = np.empty(batch_size, np.int64)
        j = np.empty(batch_size, np.int64)
        todo = np.arange(batch_size)
        for _ in range(MAX_REDRAWS):
            draw = rng.integers(0, total, len(todo))
            c = np.searchsorted(cum, draw, side="right")
            col[todo], j[todo] = c, low[c] + draw - (cum[c] - counts[c])
            todo = todo[self.tail[j[todo] % self.rows, col[todo]]]  # tails are no transition
            if not len(todo):
                return col, j
        raise ValueError("the replay buffer holds no complete transition yet")

    def _stack(self, j: np.ndarray, col: np.ndarray, out: np.ndarray) -> None:
        """Rebuild the states ending at absolute rows ``j`` into ``out``, oldest first."""
        k = self.k
        back = j[:, None] - np.arange(k)  # rows j, j-1, ..., j-k+1
        firsts = self.first[back % self.rows, col[:, None]]
        # Row j-i belongs to the episode unless one of rows j-i+1..j starts an episode.
        keep = np.concatenate(
            [np.ones((len(j), 1), bool), ~np.logical_or.accumulate(firsts, axis=1)[:, :-1]],
            axis=1,
        )
        keep &= back >= 0
        # One gather of all k frames (oldest first), then zero only the masked ones.
        frames = self.frames[back[:, ::-1] % self.rows, col[:, None]]  # (B, k, C, H, W)
        frames[~keep[:, ::-1]] = 0
        out[:] = frames.reshape(out.shape)
