"""The front door holds: README.md and docs/ match the files their facts come from, their
links and anchors resolve, and the presets' comments agree with their values."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tables():
    spec = importlib.util.spec_from_file_location("results_table", ROOT / "tools/results_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tables = _tables()


@pytest.mark.parametrize("path", sorted(tables.DOCS), ids=lambda p: p.name)
def test_generated_blocks_are_current(path):
    # fails when README's results or preset table, or a docs table, disagrees with
    # docs/results.json or presets/*.toml: run `uv run tools/results_table.py`
    text = path.read_text()
    assert tables.BLOCK.search(text), f"{path.name} has no generated block"
    assert text == tables.regenerate(text, tables.load_data(), tables.DOCS[path])


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
    data = tables.load_data()
    for path in (ROOT / "README.md", ROOT / "docs/pong-fast.md"):
        text = path.read_text()
        assert text != tables.regenerate(text, data, tables.DOCS[path], tmp_path), path.name


def test_every_summary_row_links_a_section_of_results_md():
    sets = tables.load_results()
    results_md = (ROOT / "docs/results.md").read_text()
    for s in sets:
        assert f'<a id="{s["id"]}"></a>' in results_md, s["id"]
        assert f"<!-- generated:set:{s['id']} -->" in results_md, s["id"]
        for run in s["runs"]:
            assert run["to_18"] is not None or run.get("best") is not None, (s["id"], run)


def test_a_result_added_to_the_data_file_shows_in_the_table():
    data = json.loads((ROOT / "docs/results.json").read_text())
    current = next(s for s in data["sets"] if s.get("current"))
    runs = current["runs"]
    solved = sum(r["to_18"] is not None for r in runs)
    runs.append({"seed": 9, "fps": 1000, "to_18": 99.5, "frames": 9_990_000})
    row = next(
        line for line in tables.today_table(data, "x").splitlines() if f"[{current['id']}]" in line
    )
    assert "99.5 to solve" in row and "9.99M agent steps" in row
    assert f"solved in {solved + 1} of {len(runs)}" in row


def test_seeds_short_of_the_cap_are_named_in_the_readme_minutes():
    data = json.loads((ROOT / "docs/results.json").read_text())
    current = next(s for s in data["sets"] if s.get("current") and s.get("cap"))
    current.pop("beyond_cap", None)
    for run in current["runs"]:
        run["to_18"] = 5.0
    line = next(ln for ln in tables.pong_minutes(data, "x").splitlines() if current["id"] in ln)
    n = len(current["runs"])
    assert f"({n} of {n} seeds, {current['date']}" in line
    current["runs"][0]["to_18"] = None
    current["beyond_cap"] = "the other went on to solve at 99.9 minutes"
    line = next(ln for ln in tables.pong_minutes(data, "x").splitlines() if current["id"] in ln)
    assert f"({n - 1} of {n} seeds within {current['cap']}; the other went on" in line


def test_only_current_rows_reach_the_readme_and_the_rest_reach_the_history():
    data = tables.load_data()
    today = tables.today_table(data, "docs/results.md")
    history = tables.summary_table(data["sets"], "")
    for s in data["sets"]:
        in_today, in_history = f"#{s['id']})" in today, f"#{s['id']})" in history
        assert in_today == bool(s.get("current")), s["id"]
        assert in_history == bool(s.get("summary") and not s.get("current")), s["id"]
    data["sets"][0]["current"] = False  # a recipe superseded: its row moves
    assert f"#{data['sets'][0]['id']})" not in tables.today_table(data, "docs/results.md")


def test_atari_rows_not_current_move_to_the_atari_history():
    data = tables.load_data()
    rows = data["atari"]
    assert any(r["current"] for r in rows) and any(not r["current"] for r in rows)
    today = tables.today_table(data, "")
    history = tables.atari_history(data, "")
    for r in rows:
        cells = f"| {tables._number(r['last100'])} | {tables._greedy(r['greedy'])}"
        assert (cells in today) == r["current"], r
        assert (cells in history) != r["current"], r
    # the estimate from the rows without sticky actions goes with them
    assert "Atari-5 estimate" in history and "atari5" in data
    assert ("Atari-5 estimate" in today) == ("atari5_sticky" in data)
    assert ("earlier sticky record" in history) == ("atari5_sticky_fp32" in data)


# -- every number of the README's results comes from docs/results.json ----------------------

NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?M?")


def _numbers_in(value) -> set[str]:
    """Every number docs/results.json holds, in values and inside strings, as text."""
    if isinstance(value, dict):
        return set().union(*(_numbers_in(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_numbers_in(v) for v in value)) if value else set()
    if isinstance(value, bool) or value is None:
        return set()
    return {m.replace(",", "") for m in NUMBER.findall(str(value))}


def _allowed(data) -> set[float]:
    """The numbers a generated block may show: the file's, the file's in millions, and
    the counts of runs and of solved runs it derives."""
    allowed = set()
    for token in _numbers_in(data):
        value = float(token.rstrip("M"))
        allowed |= {value, round(value / 1e6, 2)}
    for s in data["sets"]:
        allowed |= {len(s["runs"]), sum(r["to_18"] is not None for r in s["runs"])}
    return allowed


def _unsourced(text: str, data) -> list[str]:
    """Numbers in the data rows of ``text``'s results blocks that the file does not hold."""
    allowed, bad = _allowed(data), []
    for match in tables.BLOCK.finditer(text):
        if match[2] not in ("results", "pong-minutes"):
            continue
        for line in match[3].splitlines():
            if line.startswith("| preset |") or line.startswith("|---"):
                continue  # the header names units (10M frames), not results
            line = re.sub(r"\]\([^)]*\)", "]", line)  # a link's target is not a figure
            for token in NUMBER.findall(line):
                value = float(token.replace(",", "").rstrip("M"))
                if value not in allowed and -value not in allowed:
                    bad.append(token)
    return bad


def test_every_number_in_the_readme_results_comes_from_results_json():
    # fails when a figure is typed into README's generated blocks by hand, or when the
    # generator shows a number the data file does not hold
    text = (ROOT / "README.md").read_text()
    assert _unsourced(text, tables.load_data()) == []


def test_a_number_typed_into_the_readme_results_is_caught():
    data = tables.load_data()
    text = (ROOT / "README.md").read_text()
    row = next(line for line in text.splitlines() if "[xeon-amx-atari84-30min]" in line)
    forged = text.replace(row, row.replace("| 57.7 |", "| 81.7 |"))
    assert forged != text and _unsourced(forged, data) == ["81.7"]


# -- links and anchors -----------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FRONT = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _prose(text: str) -> str:
    """``text`` without fenced code blocks (a link-like string in code is not a link)."""
    return re.sub(r"(?ms)^```.*?^```", "", text)


def _anchors(path: Path) -> set[str]:
    """The #anchors a Markdown file offers: GitHub's heading slugs and <a id>s."""
    text, seen, anchors = _prose(path.read_text()), {}, set()
    for heading in re.findall(r"(?m)^#{1,6} +(.+?) *$", text):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    anchors |= set(re.findall(r'<a id="([^"]+)"', text))
    return anchors


def _broken_links(path: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_prose(path.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        missing = not dest.exists()
        if missing or (anchor and (dest.suffix != ".md" or anchor not in _anchors(dest))):
            broken.append(target)
    return broken


@pytest.mark.parametrize("path", FRONT, ids=lambda p: p.name)
def test_every_link_and_anchor_resolves(path):
    # fails on a link to a moved or deleted file, or to a heading that was renamed
    assert _broken_links(path) == []


def test_a_broken_anchor_is_caught(tmp_path):
    (tmp_path / "a.md").write_text("# Top\n\n## Which preset: minutes or score\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#which-preset-minutes-or-score) [gone](a.md#which-preset) [no](c.md)\n"
        "```\n[code](not-a-link.md)\n```\n"
    )
    assert _broken_links(page) == ["a.md#which-preset", "c.md"]


def test_the_readme_is_a_front_door():
    # the guide stays short: figures live in the generated table and docs/results.md
    assert len((ROOT / "README.md").read_text().splitlines()) <= 170


# -- a preset's comments state only numbers its fields hold ------------------------------

# (pattern, what the preset's values make of it): a claim in a comment, and its field
CLAIMS = [
    (r"(\d+) envs\b", lambda p: p.run.envs),
    (r"\bx (\d+) steps\b", lambda p: p.pqn.rollout),
    (r"(\d+) epochs\b", lambda p: p.pqn.epochs),
    (r"(\d+) minibatches\b", lambda p: p.pqn.minibatches),
    (r"minibatches of (\d+)\b", lambda p: p.run.envs * p.pqn.rollout // p.pqn.minibatches),
    (r"([\d.]+)M emulator frames\b", lambda p: p.run.steps * 4 / 1e6),
    (r"([\d.]+)M agent steps\b", lambda p: p.run.steps / 1e6),
    (r"every (\d+)k (?:agent )?steps\b", lambda p: p.eval.every / 1e3),
]
CHECKED = ["pong-fast", "atari-fast", "atari-84", "pong-pqn"]


def _comment_contradictions(path: Path) -> list[str]:
    """Each number a preset's comments claim (envs, rollout steps, epochs, minibatches and
    their size, budgets) that its loaded values contradict, as 'claim: the preset has N'."""
    from atari_speed.core.config import load_preset

    preset = load_preset(path)
    comments = " ".join(
        line.split("#", 1)[1] for line in path.read_text().splitlines() if "#" in line
    )
    comments = re.sub(r"\s+", " ", comments)
    wrong = []
    for pattern, value in CLAIMS:
        for match in re.finditer(pattern, comments):
            if float(match[1]) != float(value(preset)):
                wrong.append(f"{match[0]!r}: the preset has {value(preset):g}")
    return wrong


@pytest.mark.parametrize("name", CHECKED)
def test_a_preset_comment_states_only_what_its_fields_hold(name):
    # fails when a value changes and the comment describing it does not (atari-fast's
    # comment once called 2 epochs "pong-fast's recipe" after pong-fast went to 4)
    assert _comment_contradictions(ROOT / "presets" / f"{name}.toml") == []


def test_a_stale_preset_comment_is_caught(tmp_path):
    path = tmp_path / "atari-84.toml"
    text = (ROOT / "presets/atari-84.toml").read_text()
    path.write_text(re.sub(r"(?m)^epochs = 2$", "epochs = 4", text))
    wrong = _comment_contradictions(path)
    assert wrong and all("epochs" in w for w in wrong), wrong


@pytest.mark.parametrize("path", FRONT, ids=lambda p: p.name)
def test_no_doc_outside_the_log_refers_to_an_issue(path):
    # fails on "issue 42" or "the issue's target": a doc says what is, the dated record of
    # what was asked and when lives in docs/log/
    found = re.findall(r"(?i)\bissues? #?\d+|\bthe issue\b|\bissue's\b", path.read_text())
    assert found == []
