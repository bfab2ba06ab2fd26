"""Hostile names for the Markdown-injection tests: sample data whose ids, names, header,
category, context and duel ids are Markdown that would fetch an outside image or plant
a link (``evil.invalid`` never resolves)."""

from __future__ import annotations

from tests.dashboard.apptest import SAMPLE

EVIL = "http://evil.invalid"
ITEM_IMAGE = f"![i]({EVIL}/i.png)"
ITEM_LINK = f"[l]({EVIL}/l)"
ITEM_TAG = f"<img src={EVIL}/t.png>"
NAME_IMAGE = f"![n]({EVIL}/n.png)"
NAME_AUTOLINKS = "see www.evil.invalid or mail me@evil.invalid"  # linked without markup
COLUMN = f"![c]({EVIL}/c.png)"
CATEGORY = f"![s]({EVIL}/s.png)"
CONTEXT_COLUMN = f"[v]({EVIL}/v)"
CONTEXT_VALUE = f"![x]({EVIL}/x.png)"
FILE_NAME = f"![f]({EVIL}/f.png).csv"
LINKED_DATASET = f"![d]({EVIL}/p.png)"


def hostile_files() -> tuple[bytes, bytes]:
    """The sample data with hostile ids, a name, a header, a category, a context
    column and value, and hostile duel ids."""
    ids = {"c01": ITEM_IMAGE, "c02": ITEM_LINK, "c03": ITEM_TAG}
    items = (SAMPLE / "items.csv").read_text().splitlines()
    duels = (SAMPLE / "duels.csv").read_text().splitlines()
    items = [swap_ids(line, ids) for line in items]
    items[0] = items[0].replace("power", COLUMN)  # numeric, no missing values
    items = [line.replace(",balanced", f",{CATEGORY}") for line in items]
    items = [line.replace("Swift Falcon", f"{NAME_IMAGE} {NAME_AUTOLINKS}") for line in items]
    items = [line.replace("Swift Badger", ITEM_TAG) for line in items]  # c03: its id
    header, *rows = duels
    duels = [f"duel_id,{header.replace('venue', CONTEXT_COLUMN)}"] + [
        f"![d{k}]({EVIL}/d.png),{swap_ids(row, ids).replace('indoor', CONTEXT_VALUE)}"
        for k, row in enumerate(rows)
    ]
    return ("\n".join(items) + "\n").encode(), ("\n".join(duels) + "\n").encode()


def swap_ids(line: str, ids: dict[str, str]) -> str:
    return ",".join(ids.get(cell, cell) for cell in line.split(","))
