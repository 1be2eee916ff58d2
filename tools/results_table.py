"""The generated tables of README.md and the docs, from the files that hold their facts.

    uv run tools/results_table.py           # rewrite every generated block
    uv run tools/results_table.py --check   # exit 1 if a block is stale (tests do this)

A generated block sits between ``<!-- generated:NAME -->`` and ``<!-- /generated -->``;
everything between the two lines is replaced. The names:

- ``results``: today's presets only: one row per Pong run set of docs/results.json marked
  ``current``, and one per run of its ``atari`` list marked ``current`` (10M emulator
  frames, beside Dopamine's DQN and Rainbow), each linking its section of docs/results.md;
- ``pong-minutes``: one sentence per current Pong run set: how long pong-fast took to solve
  Pong on that kind of machine;
- ``history``: one row per Pong run set marked ``summary`` but not ``current`` (superseded
  recipes, for docs/results.md's history section);
- ``atari-history``: one row per Atari run not marked ``current``, and the Atari-5
  estimate of those rows;
- ``set:ID``: the per-seed table of run set ID of docs/results.json;
- ``presets``: one row per presets/*.toml, its values read through the preset loader and
  its summary from the file's first comment line;
- ``preset:NAME``: every field presets/NAME.toml sets, its value and its documentation.

To add a run, append it to its set's ``runs`` in docs/results.json (or add a set, and a
``set:ID`` block with its command in docs/results.md), then run this script. When a recipe
changes, set the old sets' ``current`` to false: their rows move from the README to the
history table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

from atari_speed.core.config import PRESET_DIR, SECTIONS, load_preset

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results.json"
DOCS = {  # file -> how it links to docs/results.md's sections
    ROOT / "README.md": "docs/results.md",
    ROOT / "docs" / "results.md": "",
    ROOT / "docs" / "pong-fast.md": "results.md",
    ROOT / "docs" / "atari.md": "results.md",
}
BLOCK = re.compile(r"(<!-- generated:(\S+) -->\n)(.*?)(<!-- /generated -->)", re.DOTALL)


def load_data(path: Path = RESULTS) -> dict[str, Any]:
    """docs/results.json as a whole: ``sets`` (Pong), ``atari`` and the baselines."""
    return json.loads(path.read_text())


def load_results(path: Path = RESULTS) -> list[dict[str, Any]]:
    return load_data(path)["sets"]


def _frames(frames: float | None) -> str:
    return "" if frames is None else f"{frames / 1e6:.2f}M"


def _minutes(value: float | None) -> str:
    return "" if value is None else f"{value:.1f} min"


def _cell(text: str) -> str:
    """Text fit for a table cell: a ``|`` would end the cell."""
    return text.replace("|", "\\|")


def _signed(score: float) -> str:
    return f"{score:+.1f}"


def _span(values: list[float], fmt: str) -> str:
    """``a to b`` over ``values`` (one value: itself)."""
    low, high = format(min(values), fmt), format(max(values), fmt)
    return low if low == high else f"{low} to {high}"


def _cores(cores: int) -> str:
    """A run set's CPU cores where they are not the usual 2."""
    return "" if cores == 2 else f", {cores} cores"


def _game(name: str) -> str:
    return "".join(word.capitalize() for word in name.split("_"))


def _number(value: float) -> str:
    """A score as the docs write it: thousands with commas, the decimals the file holds."""
    return f"{value:,}"


def _greedy(value: float | None) -> str:
    """play.py's greedy score of a run's best.pt, or that it was not played."""
    return "not run" if value is None else _number(value)


RESULTS_HEADER = [
    "| preset | game | machine (2 CPU cores unless said), precision | seeds | result "
    "| `play.py`, greedy "
    "| minutes | Dopamine at 10M frames: DQN / Rainbow | details |",
    "|---|---|---|---|---|---:|---:|---:|---|",
]


def _atari_row(r: dict[str, Any], dopamine: dict[str, list[float]], link: str) -> str:
    """One Atari run (or seeds' means) at 10M frames, beside Dopamine's DQN and Rainbow."""
    greedy = _greedy(r["greedy"]) + (f" ({r['greedy_note']})" if r.get("greedy_note") else "")
    baseline = dopamine.get(r["game"])
    cells = [
        f"`{r['preset']}`",
        _game(r["game"]) + (", **sticky actions (like for like)**" if r["sticky"] else ""),
        f"{r['cpu_short']}, {r['precision']}",
        ", ".join(map(str, r["seeds"])),
        f"{_number(r['last100'])}",
        greedy,
        ("~" if r["minutes_approx"] else "") + f"{r['minutes']}",
        " / ".join(_number(v) for v in baseline) if baseline else "",
        f"[{r['details']}]({link}#{r['details']})",
    ]
    return "| " + " | ".join(cells) + " |"


# Where each Atari-5 estimate in docs/results.json comes from, as its line says it.
ATARI5_SOURCES = {
    "atari5": "the rows without sticky actions above, seed 0",
    "atari5_sticky": "the sticky record of today's atari-84, its actions chosen in bf16 as it "
    "does where it trains in bf16 (docs/atari/sticky-actbf16: each game's seed mean)",
    "atari5_sticky_fp32": "the earlier sticky record, which chose its actions in fp32 "
    "(docs/atari/sticky: each game's seed mean)",
}


def _atari5_lines(data: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    """A blank line and an estimate's line for each of ``keys`` that ``data`` holds."""
    lines = []
    for key in (k for k in keys if data.get(k)):
        estimate = ", ".join(f"{name} {value}%" for name, value in data[key].items())
        lines += [
            "",
            "Atari-5 estimate of the 57-game median human-normalised score, from the "
            f"training scores of {ATARI5_SOURCES[key]}: {estimate}.",
        ]
    return lines


def atari_history(data: dict[str, Any], link: str) -> str:
    """The Atari rows no longer marked ``current`` (one seed, no sticky actions, or an
    earlier machine), with the Atari-5 estimates those rows gave."""
    dopamine = data.get("dopamine_10m", {})
    lines = list(RESULTS_HEADER)
    lines += [_atari_row(r, dopamine, link) for r in data.get("atari", []) if not r.get("current")]
    lines += _atari5_lines(data, ("atari5", "atari5_sticky_fp32"))
    return "\n".join(lines) + "\n"


def today_table(data: dict[str, Any], link: str) -> str:
    """Today's presets: Pong's current run sets, then the current Atari runs."""
    lines = list(RESULTS_HEADER)
    for s in (s for s in data["sets"] if s.get("current")):
        runs = s["runs"]
        solved = [r for r in runs if r.get("to_18") is not None]
        greedy = [r["greedy"] for r in runs if r.get("greedy") is not None]
        result = f"solved in {len(solved)} of {len(runs)}"
        if len(solved) < len(runs):
            result += f" within {s['cap']}"
        if solved:
            result += f", at {_span([r['frames'] / 1e6 for r in solved], '.2f')}M agent steps"
        cells = [
            f"`{s['preset']}`",
            "Pong",
            f"{s['cpu_short']}{_cores(s['cores'])}, {s['precision']}",
            ", ".join(str(r["seed"]) for r in runs),
            result,
            _span(greedy, ".1f") if greedy else "not run",
            f"{_span([r['to_18'] for r in solved], '.1f')} to solve" if solved else "",
            "",
            f"[{s['id']}]({link}#{s['id']})",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    dopamine = data.get("dopamine_10m", {})
    lines += [_atari_row(r, dopamine, link) for r in data.get("atari", []) if r.get("current")]
    lines += _atari5_lines(data, ("atari5_sticky",))
    return "\n".join(lines) + "\n"


def pong_minutes(data: dict[str, Any], link: str) -> str:
    """One sentence per current Pong run set: how long pong-fast took on that machine. Where
    some seeds did not solve within the set's cap, it says so, and what the set's
    ``beyond_cap`` says of them (runs that went on past it)."""
    lines = []
    for s in (s for s in data["sets"] if s.get("current")):
        solved = [r for r in s["runs"] if r.get("to_18") is not None]
        cores = _cores(s["cores"])
        took = (
            f"solved Pong in {_span([r['to_18'] for r in solved], '.1f')} minutes"
            if solved
            else f"did not solve Pong within {s['cap']}"
        )
        short = len(solved) < len(s["runs"]) and s.get("cap")
        within = f" within {s['cap']}" if short else ""
        beyond = f"; {s['beyond_cap']}" if short and s.get("beyond_cap") else ""
        lines.append(
            f"- {s['cpu_short']}{cores} ({s['precision']}): `{s['preset']}` {took} "
            f"({len(solved)} of {len(s['runs'])} seeds{within}{beyond}, {s['date']}: "
            f"[{s['id']}]({link}#{s['id']}))."
        )
    lines.append("- Any other kind of machine has not run today's pong-fast yet.")
    return "\n".join(lines) + "\n"


def summary_table(sets: list[dict[str, Any]], link: str) -> str:
    """One row per run set marked ``summary`` and not ``current``, in the file's order."""
    lines = [
        "| date | CPU (2 cores unless said), precision | preset: recipe | seeds "
        "| solved | minutes to solve | frames to solve | best smoothed, not solved "
        "| `play.py`, greedy | details |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in (s for s in sets if s.get("summary") and not s.get("current")):
        runs = s["runs"]
        solved = [r for r in runs if r.get("to_18") is not None]
        others = [r for r in runs if r.get("to_18") is None]
        cpu = s["cpu_short"] + _cores(s["cores"])
        lines.append(
            "| "
            + " | ".join(
                [
                    s["date"],
                    f"{cpu}, {s['precision']}",
                    f"`{s['preset']}`: {s['recipe']}",
                    ", ".join(str(r["seed"]) for r in runs),
                    f"{len(solved)} of {len(runs)} in {s['cap']}",
                    ", ".join(f"s{r['seed']}: {r['to_18']:.1f}" for r in solved),
                    ", ".join(f"s{r['seed']}: {_frames(r['frames'])}" for r in solved),
                    ", ".join(f"s{r['seed']}: {_signed(r['best'])}" for r in others),
                    ", ".join(
                        f"s{r['seed']}: {r['greedy']:.1f}"
                        for r in runs
                        if r.get("greedy") is not None
                    )
                    or "not run",
                    f"[{s['id']}]({link}#{s['id']})",
                ]
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def set_table(s: dict[str, Any]) -> str:
    """Run set ``s``'s runs, one row each."""
    lines = [
        "| seed | FPS | to -15 | to 0 | to 18 (solved) | frames | best smoothed "
        "| `play.py`, 10 greedy games | note |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in s["runs"]:
        solved = r.get("to_18") is not None
        greedy = "" if r.get("greedy") is None else f"{r['greedy']:.1f}"
        if greedy and r.get("greedy_range"):
            greedy += f" ({r['greedy_range']})"
        cells = [
            str(r["seed"]),
            f"{r['fps']:,}",
            _minutes(r.get("to_m15")),
            _minutes(r.get("to_0")),
            f"**{_minutes(r['to_18'])}**" if solved else f"not in {r.get('cap', s['cap'])}",
            _frames(r.get("frames")) + ("" if solved or not r.get("frames") else " (end)"),
            "solved" if solved else _signed(r["best"]) if r.get("best") is not None else "",
            greedy or "not run",
            r.get("note", ""),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _summary_line(path: Path) -> str:
    """A preset's first comment line: its one-line summary."""
    first = path.read_text().splitlines()[0]
    if not first.startswith("# "):
        raise ValueError(f"{path}: the first line must be a '# ' comment summing the preset up")
    return first[2:].strip()


def preset_table(preset_dir: Path = PRESET_DIR) -> str:
    """One row per preset file, its values as the loader reads them."""
    lines = [
        "| preset | what it is | algorithm | mode | envs | pipeline | env backend "
        "| precision | variants |",
        "|---|---|---|---|---|---|---|---|---:|",
    ]
    for path in sorted(preset_dir.glob("*.toml")):
        p = load_preset(path)
        variants = len(tomllib.loads(path.read_text()).get("variant", []))
        pipeline = p.env.pipeline if isinstance(p.env.pipeline, str) else "(inline)"
        cells = [
            f"`{path.stem}`",
            _cell(_summary_line(path)),
            p.dqn.algorithm.upper(),
            p.run.mode,
            str(p.run.envs or "auto"),
            f"`{pipeline}`",
            p.env.backend,
            p.run.precision,
            str(variants or ""),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def preset_fields(name: str, preset_dir: Path = PRESET_DIR) -> str:
    """Every field presets/NAME.toml sets (not its variants), with the field's doc."""
    raw = tomllib.loads((preset_dir / f"{name}.toml").read_text())
    lines = ["| field | value | what it is |", "|---|---|---|"]
    for section, values in raw.items():
        if section not in SECTIONS:
            continue
        docs = {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(SECTIONS[section])}
        for key, value in values.items():
            shown = json.dumps(value) if isinstance(value, str | bool) else f"{value:,}"
            lines.append(f"| `{section}.{key}` | `{shown}` | {_cell(docs.get(key, ''))} |")
    return "\n".join(lines) + "\n"


def render(name: str, data: dict[str, Any], link: str, preset_dir: Path) -> str:
    """The text of the block called ``name``."""
    sets = data["sets"]
    if name == "results":
        return today_table(data, link)
    if name == "pong-minutes":
        return pong_minutes(data, link)
    if name == "history":
        return summary_table(sets, link)
    if name == "atari-history":
        return atari_history(data, link)
    if name == "presets":
        return preset_table(preset_dir)
    if name.startswith("set:"):
        wanted = name[4:]
        match = [s for s in sets if s["id"] == wanted]
        if not match:
            raise ValueError(f"block {name!r}: no run set {wanted!r} in {RESULTS.name}")
        return set_table(match[0])
    if name.startswith("preset:"):
        return preset_fields(name[7:], preset_dir)
    raise ValueError(f"unknown generated block {name!r}")


def regenerate(text: str, data: dict[str, Any], link: str, preset_dir: Path = PRESET_DIR) -> str:
    """``text`` with every generated block rewritten from ``data`` (docs/results.json)."""
    return BLOCK.sub(lambda m: m[1] + render(m[2], data, link, preset_dir) + m[4], text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale blocks")
    args = parser.parse_args(argv)
    data, stale = load_data(), []
    for path, link in DOCS.items():
        text = path.read_text()
        new = regenerate(text, data, link)
        if new != text:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new)
    verb = "stale" if args.check else "rewritten"
    print(f"{verb}: {', '.join(map(str, stale))}" if stale else "all generated blocks current")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
