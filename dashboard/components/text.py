"""User strings inside Markdown: escaped, so they show as typed and never as markup.

Streamlit renders messages, captions, headers, widget labels, progress texts and
radio options as Markdown. A file, column, item or duel name such as
``![x](https://evil.example/p.png)`` or ``[click](javascript:...)`` would otherwise
fetch an outside image or plant a link. :func:`md` backslash-escapes every ASCII
punctuation character Markdown (and Streamlit's ``:color[...]`` / ``:icon:``
directives and ``$`` maths) gives a meaning to, and flattens line breaks, so the
text is shown literally. Every user-supplied string shown through Markdown goes
through it; the product's own wording does not need to.
"""

from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=&\"'])")


def md(text: object) -> str:
    """``text`` escaped for Markdown (one line)."""
    flat = re.sub(r"[\r\n\t]+", " ", str(text))
    return _SPECIAL.sub(r"\\\1", flat)
