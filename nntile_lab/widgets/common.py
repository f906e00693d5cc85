"""Pieces the widgets share: figures as PNG images, messages, CSS class names."""
from __future__ import annotations

import html
import io

import ipywidgets as w


def png(fig, dpi: int = 80) -> bytes:
    """A matplotlib Figure as PNG bytes (an Image widget shows them in any front end)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def image(cls: str) -> w.Image:
    img = w.Image(format="png", layout=w.Layout(max_width="100%"))
    img.add_class(cls)
    return img


def label(cls: str, text: str = "") -> w.HTML:
    out = w.HTML(text)
    out.add_class(cls)
    return out


def error_html(text: str) -> str:
    return ('<div style="color:#b00020;white-space:pre-wrap"><b>Error:</b> '
            f"{html.escape(text)}</div>")


def notice_html(lines) -> str:
    items = "".join(f"<li>{html.escape(str(x))}</li>" for x in lines)
    return f'<ul style="color:#8a5a00;margin:0">{items}</ul>' if items else ""


def failures(df) -> list[str]:
    """One line per failed point: its varied values and the error."""
    from nntile_lab.sweep.plots import varied
    names = varied(df)
    bad = df[df["error"].notna()]
    return [(", ".join(f"{n}={r[n]}" for n in names) or "point") + f": {r['error']}"
            for _, r in bad.iterrows()]
