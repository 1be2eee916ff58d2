"""The generated tables of README.md and docs/ match the files their facts come from."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tables():
    spec = importlib.util.spec_from_file_location(
        "results_table", ROOT / "benchmarks/results_table.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tables = _tables()


@pytest.mark.parametrize("path", sorted(tables.DOCS), ids=lambda p: p.name)
def test_generated_blocks_are_current(path):
    # fails when README's results or preset table, or a docs table, disagrees with
    # docs/results.json or presets/*.toml: run `uv run benchmarks/results_table.py`
    text = path.read_text()
    assert tables.BLOCK.search(text), f"{path.name} has no generated block"
    assert text == tables.regenerate(text, tables.load_results(), tables.DOCS[path])


def test_readme_has_the_results_and_preset_tables_and_every_preset():
    names = [m[2] for m in tables.BLOCK.finditer((ROOT / "README.md").read_text())]
    assert names.count("results") == 1 and names.count("presets") == 1
    table = tables.preset_table()
    for path in (ROOT / "presets").glob("*.toml"):
        assert f"| `{path.stem}` |" in table


def test_a_changed_preset_value_makes_the_docs_stale(tmp_path):
    # the check must be able to fail: pong-fast with another env count
    for path in (ROOT / "presets").glob("*.toml"):
        (tmp_path / path.name).write_text(path.read_text())
    fast = tmp_path / "pong-fast.toml"
    text, changed = re.subn(
        r"(?m)^envs = (\d+)", lambda m: f"envs = {2 * int(m[1])}", fast.read_text()
    )
    assert changed == 1
    fast.write_text(text)
    sets = tables.load_results()
    for path in (ROOT / "README.md", ROOT / "docs/pong-fast.md"):
        text = path.read_text()
        assert text != tables.regenerate(text, sets, tables.DOCS[path], tmp_path), path.name


def test_every_summary_row_links_a_section_of_results_md():
    sets = tables.load_results()
    results_md = (ROOT / "docs/results.md").read_text()
    for s in sets:
        assert f'<a id="{s["id"]}"></a>' in results_md, s["id"]
        assert f"<!-- generated:set:{s['id']} -->" in results_md, s["id"]
        for run in s["runs"]:
            assert run["to_18"] is not None or run.get("best") is not None, (s["id"], run)


def test_a_result_added_to_the_data_file_shows_in_the_table():
    sets = json.loads((ROOT / "docs/results.json").read_text())["sets"]
    runs = sets[0]["runs"]
    solved = sum(r["to_18"] is not None for r in runs)
    runs.append({"seed": 9, "fps": 1000, "to_18": 20.5, "frames": 2_000_000})
    row = tables.summary_table(sets, "docs/results.md").splitlines()[2]
    assert "s9: 20.5" in row and "s9: 2.00M" in row
    assert f"{solved + 1} of {len(runs)}" in row
