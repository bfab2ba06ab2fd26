"""User strings never become Markdown: every page walked with hostile names.

Item ids and names, a covariate header, a category, a context column and value, duel
ids and file names are all Markdown that would fetch an outside image or plant a
link (``![i](http://evil.invalid/i.png)``, ``[l](...)``, ``<img src=...>``); so is a
deep link's ``dataset=``. The test reads the Markdown *sources* Streamlit receives
(every body, label, help, caption, progress text, radio and button-group option,
expander, tab and popover label, toast) and asserts that none of them holds an
unescaped image, link or ``<img`` tag, while the hostile text itself is shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import pages
from tests.dashboard.apptest import (
    APP,
    TIMEOUT_S,
    assert_clean,
    goto,
    new_app,
    sample_upload,
    settle,
    shown,
)
from tests.dashboard.hostile import (
    COLUMN,
    CONTEXT_COLUMN,
    CONTEXT_VALUE,
    EVIL,
    FILE_NAME,
    ITEM_IMAGE,
    ITEM_LINK,
    ITEM_TAG,
    LINKED_DATASET,
    NAME_AUTOLINKS,
    NAME_IMAGE,
    hostile_files,
)

# Fields of Streamlit's element protos that the browser renders as Markdown. Radio
# options are Markdown too (selectbox and multiselect options are plain text).
MARKDOWN_FIELDS = {"body", "label", "help", "text", "captions", "content", "selected_content"}
PLAIN_ELEMENTS = {"code", "json", "text", "plotly_chart", "arrow_data_frame", "exception"}


def _nodes(node) -> Iterator:
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _nodes(child)


def _strings(message, field_names: set[str]) -> Iterator[str]:
    """Every string of ``message`` (a protobuf) in a field named in ``field_names``."""
    for field, value in message.ListFields():
        values = value if field.is_repeated else [value]
        for item in values:
            if field.type == field.TYPE_MESSAGE:
                yield from _strings(item, field_names)
            elif field.type == field.TYPE_STRING and field.name in field_names:
                yield item


def markdown_sources(at: AppTest) -> list[str]:
    """The Markdown sources of every element and block of the last run."""
    found = []
    for node in _nodes(at._tree):
        proto = getattr(node, "proto", None)
        if proto is None or getattr(node, "type", "") in PLAIN_ELEMENTS:
            continue
        names = MARKDOWN_FIELDS | ({"options"} if node.type == "radio" else set())
        found.extend(_strings(proto, names))
    return found


def unescaped_markup(source: str) -> list[str]:
    """Images, links (other than the product's own relative links to its pages,
    ``](<url_path>?...)``) and ``<img`` tags left in a Markdown source once escaped
    characters are removed, and autolink literals to the hostile host (which escapes
    alone do not stop)."""
    bare = re.sub(r"\\.", "", source)
    found = re.findall(r"!\[|\]\((?!" + OWN_LINK + ")", bare)
    found += re.findall(r"<img", bare, flags=re.IGNORECASE)
    return found + re.findall(r"(?i)https?\\?://evil|www\\?\.evil|[\w.+-]@evil", source)


# The product's own links: a page of this app (dashboard.pages) and its query.
OWN_LINK = "(?:" + "|".join(re.escape(view.url_path) for view in pages.ALL) + r")?\?"


class Walk:
    """Collects the Markdown sources of every run it is given."""

    def __init__(self) -> None:
        self.sources: list[str] = []

    def __call__(self, at: AppTest, *, error_shown: bool = False) -> AppTest:
        if error_shown:  # a message the user's own input asked for
            assert not at.exception and at.error
        else:
            assert_clean(at)
        self.sources.extend(markdown_sources(at))
        return at

    def shows(self, text: str) -> bool:
        return any(text in shown(s) for s in self.sources)


def _widget(at: AppTest, kind: str, key_start: str):
    return next(w for w in at.get(kind) if (w.key or "").startswith(key_start))


def walk_every_page() -> Walk:
    """Upload the hostile files, train, open every page (and a hostile deep link)."""
    walk = Walk()
    items, duels = hostile_files()
    at = walk(sample_upload(new_app(), items, duels, items_name=FILE_NAME, duels_name=FILE_NAME))

    at.switch_page("views/train.py").run()
    at.number_input(key="train:centres").set_value(60)
    at.checkbox(key="train:refine").set_value(False)
    next(b for b in at.button if b.label == "Train").click().run()
    walk(settle(at))

    walk(goto(at, "explain"))
    _widget(at, "button_group", "explain:subset:").set_value("Between two groups").run()
    _widget(at, "selectbox", "explain:gcol:").set_value(COLUMN).run()
    _widget(at, "selectbox", "explain:gopa:").set_value(">").run()
    walk(settle(at))
    _widget(at, "selectbox", "explain:gcol:").set_value("style").run()
    walk(settle(at))
    _widget(at, "button_group", "explain:subset:").set_value("Under one context").run()
    walk(settle(at))

    at.switch_page("views/players.py").run()
    _widget(at, "selectbox", "players:item:").set_value(ITEM_LINK).run()  # named NAME_IMAGE
    walk(settle(at))
    _widget(at, "button_group", "players:view:").set_value("losses").run()
    _widget(at, "toggle", "players:sides:").set_value(True).run()
    walk(settle(at))

    at.switch_page("views/duel.py").run()
    first = next(r for r in duels.decode().splitlines()[1:] if ITEM_IMAGE in r)
    _widget(at, "text_input", "duel:id:").set_value(first.split(",")[0]).run()
    walk(settle(at))
    _widget(at, "text_input", "duel:id:").set_value(f"{ITEM_IMAGE} vs {ITEM_LINK}").run()
    walk(settle(at))
    _widget(at, "text_input", "duel:id:").set_value(ITEM_IMAGE).run()  # not a duel id
    walk(at, error_shown=True)

    at.switch_page("views/head_to_head.py").run()
    _widget(at, "selectbox", "h2h:a:").set_value(ITEM_LINK).run()
    _widget(at, "selectbox", "h2h:b:").set_value(ITEM_TAG).run()
    walk(settle(at))

    for page in ("rankings", "intransitivity", "data"):
        walk(goto(at, page))

    linked = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    linked.query_params["dataset"] = LINKED_DATASET
    walk(linked.run())
    return walk


@pytest.mark.slow
def test_every_page_shows_hostile_names_literally() -> None:
    walk = walk_every_page()
    bad = {s: unescaped_markup(s) for s in walk.sources if unescaped_markup(s)}
    assert not bad, bad
    # Shown as typed, everywhere it matters (a test of the walk itself, too).
    for text in (ITEM_IMAGE, ITEM_LINK, ITEM_TAG, NAME_IMAGE, NAME_AUTOLINKS, COLUMN,
                 CONTEXT_COLUMN, CONTEXT_VALUE, FILE_NAME, LINKED_DATASET,
                 f"({EVIL}/d.png)"):  # fmt: skip
        assert walk.shows(text), text


def test_the_walk_sees_what_it_must_refuse() -> None:
    """The checker itself: raw markup is found, escaped markup and own links are not."""
    from dashboard.components.text import md

    for raw in (ITEM_IMAGE, ITEM_LINK, ITEM_TAG, f"**{COLUMN}**", NAME_AUTOLINKS, EVIL):
        assert unescaped_markup(raw), raw
        assert not unescaped_markup(md(raw)), md(raw)
    assert not unescaped_markup("[a › b](?page=head-to-head&a=1&b=2)")
