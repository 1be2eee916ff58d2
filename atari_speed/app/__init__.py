"""The entry points: train.py and play.py, auto configuration, ablations, the viewer."""
