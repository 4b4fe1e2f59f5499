"""What the tests look for in the course's notebooks: the ones a student reads, and the lines a source
notebook hides from the release. Test helpers, so not in the packages that ship."""
import re
from pathlib import Path

from course.classroom import ROOT


def student_notebooks(root: Path = ROOT) -> list[Path]:
    """The lessons and the release notebooks: every notebook a student gets."""
    return sorted((root / "notebooks").glob("*.ipynb")) + sorted((root / "release").glob("*/*.ipynb"))


def hidden_lines(source, regions=("SOLUTION", "HIDDEN TESTS")) -> set[str]:
    """Lines that stand only inside the given regions of a source notebook, never outside them."""
    kinds = "|".join(regions)
    inside, hidden, visible = False, set(), set()
    for cell in source.cells:
        for line in cell.source.splitlines():
            stripped = line.strip()
            if re.match(rf"### BEGIN ({kinds})", stripped):
                inside = True
            elif re.match(rf"### END ({kinds})", stripped):
                inside = False
            elif stripped:
                (hidden if inside else visible).add(stripped)
    return hidden - visible
