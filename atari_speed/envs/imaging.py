"""Image backends for WarpFrame: RGB emulator frame -> small gray (or RGB) uint8 image.

Every backend has the same signature, ``resize(frame, width, height, grayscale)``, takes an
``(H, W, 3)`` uint8 frame and returns ``(height, width)`` (gray) or ``(height, width, 3)``
uint8. They are chosen by name from ``IMAGE_BACKENDS``.

All three convert to gray first and then shrink by area averaging, as the book's OpenCV
``cvtColor`` + ``INTER_AREA`` does; they differ only in rounding (tests bound the difference).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import cv2
import numpy as np
from PIL import Image

ResizeFn = Callable[[np.ndarray, int, int, bool], np.ndarray]

# ITU-R BT.601 luma, the weights OpenCV's RGB2GRAY and Pillow's "L" mode use.
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def resize_opencv(frame: np.ndarray, width: int, height: int, grayscale: bool) -> np.ndarray:
    """OpenCV: cvtColor to gray, then resize with INTER_AREA (the book's choice)."""
    if grayscale:
        frame = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
    return cv2.resize(frame, (width, height), interpolation=cv2.INTER_AREA)


def resize_pillow(frame: np.ndarray, width: int, height: int, grayscale: bool) -> np.ndarray:
    """Pillow (or pillow-simd, if installed in its place): convert("L"), then BOX resize.

    BOX is Pillow's area-averaging filter, the counterpart of OpenCV's INTER_AREA.
    """
    image = Image.fromarray(frame)
    if grayscale:
        image = image.convert("L")
    return np.asarray(image.resize((width, height), Image.Resampling.BOX))


@lru_cache(maxsize=32)
def _area_matrix(src: int, dst: int) -> np.ndarray:
    """(dst, src) matrix whose row i averages the source pixels output pixel i covers.

    Each output pixel spans ``src/dst`` source pixels; a source pixel cut by a boundary
    contributes the fraction that lies inside. This is what INTER_AREA computes.
    """
    scale = src / dst
    weights = np.zeros((dst, src), dtype=np.float32)
    for i in range(dst):
        start, end = i * scale, (i + 1) * scale
        for j in range(int(np.floor(start)), min(int(np.ceil(end)), src)):
            weights[i, j] = min(end, j + 1) - max(start, j)
    weights /= weights.sum(axis=1, keepdims=True)
    return weights


def resize_numpy(frame: np.ndarray, width: int, height: int, grayscale: bool) -> np.ndarray:
    """Pure numpy: luma dot product, then area averaging as two small matrix products."""
    rows = _area_matrix(frame.shape[0], height)
    cols = _area_matrix(frame.shape[1], width)
    if grayscale:
        gray = frame @ _LUMA
        out = rows @ gray @ cols.T
    else:
        channels = np.moveaxis(frame, 2, 0).astype(np.float32)  # (3, H, W)
        out = np.moveaxis(rows @ channels @ cols.T, 0, 2)
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


IMAGE_BACKENDS: dict[str, ResizeFn] = {
    "opencv": resize_opencv,
    "pillow": resize_pillow,
    "numpy": resize_numpy,
}
