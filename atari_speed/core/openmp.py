"""How long OpenMP's idle threads spin before they sleep, set before torch loads.

torch on Linux runs its CPU ops on GNU OpenMP (libgomp), whose threads spin on a core
after each parallel region, for ``GOMP_SPINCOUNT`` pauses (300,000 by default:
milliseconds), in case another region follows. After an update's ops one follows within
microseconds and the spin pays; after acting, the next thing to run is the emulator's step
on the same cores, and the spinning thread takes a core from it. 30,000 pauses keep the
threads awake through an update and give the core back early in an env step: the same
arithmetic, bit for bit. What it buys, measured, and on which CPU:
docs/roofline.md, "OpenMP's spinning threads".

libgomp reads the variable once, when it loads, so this module is imported first by the
package (``atari_speed/__init__.py``); a value already in the environment wins, and so
does ``OMP_WAIT_POLICY`` (libgomp then ignores ``GOMP_SPINCOUNT``). Other OpenMP
runtimes ignore the variable.
"""

from __future__ import annotations

import os

SPIN_COUNT = "30000"

os.environ.setdefault("GOMP_SPINCOUNT", SPIN_COUNT)
