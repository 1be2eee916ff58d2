"""A run: plan, session, tracking, checkpoints, evaluation, and the mode loops."""
