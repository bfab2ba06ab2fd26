"""User strings inside Markdown: escaped, so they show as typed and never as markup.

Streamlit renders messages, captions, headers, widget labels, help tooltips, progress
texts, toasts, expander and tab labels and radio options as Markdown. A file, column,
item or duel name such as ``![x](https://evil.example/p.png)`` or
``[click](javascript:...)`` would otherwise fetch an outside image or plant a link.
:func:`md` backslash-escapes every ASCII punctuation character Markdown (and
Streamlit's ``:color[...]`` / ``:icon:`` directives and ``$`` maths) gives a meaning
to, and flattens line breaks, so the text is shown literally.

Escapes do not stop GitHub's *autolink literals* (``https://...``, ``www....``,
``name@host``), which the renderer links after resolving them; an invisible word
joiner (U+2060) inside ``://``, ``www.`` and before ``@`` does, and the text still
reads the same. Every user-supplied string shown through Markdown goes through
:func:`md` (the one helper); the product's own wording does not need to.
"""

from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=&\"'])")
JOINER = "\u2060"  # WORD JOINER: no width, no line break, breaks autolink literals
_AUTOLINK = re.compile(r"(?i)(?<=:)(?=//)|(?<=w)(?=ww\.)|(?=@)")


def md(text: object) -> str:
    """``text`` escaped for Markdown (one line)."""
    flat = re.sub(r"[\r\n\t]+", " ", str(text))
    return _SPECIAL.sub(r"\\\1", _AUTOLINK.sub(JOINER, flat))
