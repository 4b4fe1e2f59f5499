"""The lessons' figures: each committed SVG is exactly what its code in notebooks/figures/ draws."""
import sys
from pathlib import Path

import pytest


FIGURES = Path(__file__).resolve().parents[2] / "notebooks" / "figures"
sys.path.insert(0, str(FIGURES))
import draw  # noqa: E402


@pytest.mark.parametrize("name", sorted(draw.figure_modules()))
def test_committed_figure_is_what_the_code_draws(name):
    committed = FIGURES / f"{name}.svg"
    assert committed.exists(), f"{committed} is missing: run `make figures` / 缺少 {committed}：请运行 `make figures`"
    assert draw.render(draw.figure_modules()[name]) == committed.read_text("utf-8"), (
        f"{committed.name} differs from what fig_{name}.py draws: run `make figures` and commit the SVG.\n"
        f"{committed.name} 与 fig_{name}.py 画出的图不同：请运行 `make figures` 并提交这个 SVG。")


def test_every_figure_is_shown_in_a_lesson():
    lessons = "".join(path.read_text("utf-8") for path in FIGURES.parent.glob("*.ipynb"))
    for svg in FIGURES.glob("*.svg"):
        assert f"figures/{svg.name}" in lessons, f"{svg.name} is not shown in any lesson / 没有任何一课展示 {svg.name}"
