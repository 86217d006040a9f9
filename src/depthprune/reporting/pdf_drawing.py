"""What a matplotlib PDF draws, without how its fonts are packed: for comparing figures across versions.

A PDF's bytes change when only the embedded font program does: fontTools 4.69 subsets the TrueType
font that matplotlib embeds (``pdf.fonttype: 42``) into another, larger program, while every page's
drawing and text operators stay the same (issue 65). ``drawing`` keeps every object of the file in
order (page content streams decompressed, images, marker and hatch paths, font dictionaries and glyph
widths, graphics states), and leaves out only the font programs (``/FontFile*`` streams: those whose
dictionary has ``/Length1``, ``/Length2``, ``/Length3`` or a font ``/Subtype``), the document
information dictionary (producer, creator, dates) and the byte lengths and offsets that follow from
them. A moved point, a changed label or a missing panel changes it; a re-subset font does not.

matplotlib's PDF writer uses neither object streams nor cross-reference streams, so the objects are
read with a regular expression; a file of another writer is compared as what it holds, object by object.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

_OBJECT = re.compile(rb"(\d+) (\d+) obj\b(.*?)\bendobj", re.S)
_STREAM = re.compile(rb"^(.*?>>)\s*stream\r?\n(.*)\bendstream\s*$", re.S)
_LENGTH = re.compile(rb"/Length\d? \d+( 0 R)?")
_FONT_PROGRAM = re.compile(rb"/Length[123] |/Subtype\s*/(Type1C|CIDFontType0C|OpenType)\b")
_INFO = re.compile(rb"/(Producer|CreationDate|ModDate|Creator)\b")


def drawing(path: str | Path) -> list[bytes]:
    """The objects of a PDF that decide what it shows, in file order (see the module's docstring)."""
    data = Path(path).read_bytes()
    if not data.startswith(b"%PDF-"):
        raise ValueError(f"{path}: not a PDF file")
    kept = []
    for match in _OBJECT.finditer(data):
        body = match.group(3).strip()
        stream = _STREAM.match(body)
        if stream is None:
            if _INFO.search(body):
                continue
            kept.append(body)
            continue
        head, content = stream.group(1), stream.group(2)
        if _FONT_PROGRAM.search(head):
            continue
        if b"/FlateDecode" in head:
            content = zlib.decompress(content)
        kept.append(_LENGTH.sub(b"", head) + b"\nstream\n" + content)
    if not kept:
        raise ValueError(f"{path}: no PDF objects found")
    return kept


def drawing_difference(first: str | Path, second: str | Path) -> str | None:
    """None when two PDFs draw the same; else where they first differ, in words."""
    a, b = drawing(first), drawing(second)
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"object {index + 1} of what they draw differs ({x[:60]!r}... against {y[:60]!r}...)"
    if len(a) != len(b):
        return f"they draw {len(a)} and {len(b)} objects"
    return None
