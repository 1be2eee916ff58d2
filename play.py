"""Play a trained agent and print its scores: ``uv run play.py runs/<run>/best.pt``."""

import sys

from atari_speed.app.play import play_main

if __name__ == "__main__":
    sys.exit(play_main())
