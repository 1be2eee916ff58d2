"""The OpenMP spin setting reaches the environment before torch loads, unless the user
set their own."""

import os
import subprocess
import sys

from atari_speed.core.openmp import SPIN_COUNT

# What GOMP_SPINCOUNT was when something first imported torch (libgomp reads it then),
# starting from what train.py imports.
PROBE = """
import os, sys
seen = []
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and not seen:
            seen.append(os.environ.get("GOMP_SPINCOUNT"))
sys.meta_path.insert(0, Watch())
import atari_speed.app.cli
import atari_speed.run.training
import torch
print(seen[0])
"""


def probe(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_spin_count_is_set_before_torch_loads():
    assert probe() == SPIN_COUNT


def test_a_users_spin_count_wins():
    assert probe(GOMP_SPINCOUNT="123") == "123"
