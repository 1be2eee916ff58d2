"""The agent: network, policy, replay, learner, schedules, and the one actor."""
