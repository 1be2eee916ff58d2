"""Image backends: same shape and dtype, and a bounded difference from OpenCV on Pong."""

from __future__ import annotations

import numpy as np
import pytest

from atari_speed.envs.imaging import IMAGE_BACKENDS, _area_matrix
from atari_speed.envs.pipeline import make_emulator


@pytest.fixture(scope="module")
def pong_frames() -> list[np.ndarray]:
    emu = make_emulator("pong")
    emu.reset(seed=0)
    rng = np.random.default_rng(0)
    frames = []
    for t in range(1000):
        obs, *_ = emu.step(int(rng.integers(6)))
        if t % 25 == 0:
            frames.append(obs)
    return frames


@pytest.mark.parametrize("backend", list(IMAGE_BACKENDS))
@pytest.mark.parametrize(("grayscale", "shape"), [(True, (84, 84)), (False, (84, 84, 3))])
def test_backends_share_shape_and_dtype(pong_frames, backend, grayscale, shape):
    out = IMAGE_BACKENDS[backend](pong_frames[0], 84, 84, grayscale)
    assert out.shape == shape and out.dtype == np.uint8


# Mean absolute difference from OpenCV INTER_AREA on real Pong frames, in gray levels
# (0-255). Measured: numpy ~0.014 (rounding only, never more than 1 level off), Pillow
# ~0.61: its BOX filter gives a source pixel cut by an output-pixel border all or none of
# its weight instead of the covered fraction, so single edge pixels can differ a lot.
BOUNDS = {"numpy": (0.05, 1), "pillow": (1.0, 255)}


@pytest.mark.parametrize("backend", list(BOUNDS))
@pytest.mark.parametrize("grayscale", [True, False])
def test_backends_agree_with_opencv_on_pong(pong_frames, backend, grayscale):
    mean_bound, max_bound = BOUNDS[backend]
    for frame in pong_frames:
        ref = IMAGE_BACKENDS["opencv"](frame, 84, 84, grayscale).astype(np.int16)
        diff = np.abs(IMAGE_BACKENDS[backend](frame, 84, 84, grayscale) - ref)
        assert diff.mean() < mean_bound and diff.max() <= max_bound


def test_area_matrix_averages_covered_fractions():
    m = _area_matrix(5, 2)  # each output pixel covers 2.5 source pixels
    assert np.allclose(m.sum(axis=1), 1.0)
    assert np.allclose(m[0], [0.4, 0.4, 0.2, 0, 0]) and np.allclose(m[1], [0, 0, 0.2, 0.4, 0.4])
