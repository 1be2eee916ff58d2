"""What ``train.py --resume`` goes on with: the preset its checkpoint was resolved to at
the run's first start (the budget, envs, backend, precision, mode and schedules that
``auto`` chose then are not chosen again), changed only by what is given with --resume,
and said in one line."""

from __future__ import annotations

from pathlib import Path

from atari_speed.core.config import SECTIONS, Preset, apply, apply_overrides
from atari_speed.core.errors import ConfigError
from atari_speed.run.checkpoint import load_checkpoint


def resumed_preset(
    path: str | Path, overrides: list[str], named: str | None = None
) -> tuple[Preset, str]:
    """The checkpoint at ``path``'s preset with ``overrides`` (``section.key=value``)
    applied, and the line that says what goes on and what they change. ``named``: the
    --preset given, which must be the checkpoint's own. ConfigError for a checkpoint that
    cannot be read or an override that does not fit. A checkpoint of an earlier version
    names fields by their old names (run.frames, ...): config.RENAMED reads them."""
    saved = dict(load_checkpoint(path).preset)
    name = str(saved.pop("name", "custom"))
    if named is not None and Path(named).stem != name:
        raise ConfigError(
            f"--resume: {path} was trained with preset {name}, not {named}; a resume goes "
            "on with its checkpoint's preset: leave --preset out and change fields with --set"
        )
    first = apply(f"--resume {path}: the checkpoint's preset", Preset(name=name), saved)
    preset = apply_overrides(first, overrides)
    run = first.run
    line = (
        f"--resume: {path}: {name} as resolved at its start ({run.mode}, {run.envs} envs, "
        f"{first.env.backend} backend, {run.precision}, {run.steps:,} agent steps)"
    )
    changes = changed_fields(first, preset)
    if changes:
        line += ", changed by what was given with --resume: " + ", ".join(changes)
    return preset, line


def changed_fields(before: Preset, after: Preset) -> list[str]:
    """``section.key old -> new`` for every field that differs."""
    old, new = before.to_dict(), after.to_dict()
    return [
        f"{section}.{key} {value!r} -> {new[section][key]!r}"
        for section in SECTIONS
        for key, value in old[section].items()
        if new[section][key] != value
    ]
