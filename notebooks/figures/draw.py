"""Draw the lessons' figures: every `fig_*.py` next to this file defines `draw()` returning a matplotlib
Figure, saved as `<name>.svg` (the name without `fig_`). `make figures` runs this; tests/unit/test_figures.py
fails when a committed SVG differs from what the code draws.

SVGs keep their text as text (`svg.fonttype = "none"`) so the browser renders the Chinese labels with
its own fonts and the output does not depend on the fonts installed here; a fixed hash salt and no date
make the file the same on every run.
"""
import importlib.util
import sys
from io import StringIO
from pathlib import Path

import logging

import matplotlib

matplotlib.use("svg")
logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)  # "using weight 500" for WenQuanYi
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402

HERE = Path(__file__).resolve().parent
CJK_FONT = "WenQuanYi Zen Hei"
STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "torch-to-course",
    # DejaVu Sans comes with matplotlib; the Chinese labels fall back to the CJK font that `make browser`
    # installs (fonts-wqy-zenhei), which also sets their measured width in the layout
    "font.family": ["DejaVu Sans", CJK_FONT],
    "font.size": 10,
}


def _find_cjk_font():
    """matplotlib caches the system's fonts once per user: a cache made before `make browser` installed the
    CJK font does not know it, and every Chinese label would be measured as missing glyphs. Add it then."""
    if CJK_FONT not in {font.name for font in font_manager.fontManager.ttflist}:
        for path in font_manager.findSystemFonts():
            if "wqy" in Path(path).name.lower():
                font_manager.fontManager.addfont(path)


_find_cjk_font()


def figure_modules():
    """{name: path} of every figure's code, sorted by name."""
    return {path.stem.removeprefix("fig_"): path for path in sorted(HERE.glob("fig_*.py"))}


def render(path: Path) -> str:
    """The SVG text that the figure code at `path` draws."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with plt.rc_context(STYLE):
        figure = module.draw()
        out = StringIO()
        figure.savefig(out, format="svg", metadata={"Date": None}, bbox_inches="tight")
        plt.close(figure)
    return out.getvalue()


def main(names=()) -> int:
    for name, path in figure_modules().items():
        if not names or name in names:
            (HERE / f"{name}.svg").write_text(render(path), encoding="utf-8")
            print(HERE / f"{name}.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
