"""Train a DQN or PQN agent on an Atari game: ``uv run train.py --preset pong-fast``."""

import sys

from atari_speed.app.cli import train_main

if __name__ == "__main__":
    sys.exit(train_main())
