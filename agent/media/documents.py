"""Documents to text: a PDF's text layer (pypdf), a text file decoded; capped, pure."""

from __future__ import annotations

import io
from dataclasses import dataclass

__all__ = ["DocumentText", "document_text"]

MAX_PDF_PAGES = 500
"""Pages read from one PDF; a longer one is read this far (and said to be longer)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DocumentText:
    text: str
    """The text, at most the cap given (empty: the document has no text layer)."""
    total_chars: int
    """How long the whole text is (more than `len(text)` when it was cut)."""
    pages: int | None = None

    @property
    def is_cut(self) -> bool:
        return self.total_chars > len(self.text)


def document_text(data: bytes, kind: str, *, max_chars: int) -> DocumentText:
    """The text of a PDF or text file, cut at `max_chars`. Raises ValueError for a PDF pypdf
    cannot read (damaged, encrypted)."""
    if kind == "pdf":
        text, pages = _pdf_text(data, max_chars)
    else:
        text, pages = data.decode("utf-8", errors="replace"), None
    text = text.replace("\x00", "")
    return DocumentText(text=text[:max_chars], total_chars=len(text), pages=pages)


def _pdf_text(data: bytes, max_chars: int) -> tuple[str, int]:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise ValueError("the PDF is encrypted")
        pages = len(reader.pages)
        texts: list[str] = []
        size = 0
        for page in reader.pages[:MAX_PDF_PAGES]:
            text = page.extract_text() or ""
            texts.append(text)
            size += len(text)
            if size > max_chars * 2:  # enough to know it is cut; stop reading
                break
    except (PyPdfError, KeyError, TypeError, AttributeError, OSError) as exc:
        raise ValueError(f"the PDF cannot be read: {type(exc).__name__}") from exc
    return "\n\n".join(t.strip() for t in texts if t.strip()), pages
