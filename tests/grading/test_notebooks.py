"""Every notebook is bilingual, and release/ is exactly what nbgrader makes of source/."""
import re

import nbformat
import pytest

from course import classroom
from course.authoring.glossary import missing_terms
from support.notebooks import hidden_lines

ROOT = classroom.ROOT
NOTEBOOKS = sorted([*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("source/*/*.ipynb"), *ROOT.glob("release/*/*.ipynb")])
ASSIGNMENTS = sorted(p.name for p in (ROOT / "source").iterdir() if p.is_dir())
CJK = re.compile(r"[\u4e00-\u9fff]")
LATIN = re.compile(r"[A-Za-z]")
CODE = re.compile(r"```.*?```|`[^`]*`|https?://\S+", re.S)


def prose(cell) -> str:
    return CODE.sub("", cell.source)


def is_answer_cell(cell) -> bool:
    """A cell the student writes: an nbgrader answer, or a lesson's cell for a prediction."""
    return cell.metadata.get("nbgrader", {}).get("solution", False) or "prediction" in cell.metadata.get("tags", [])


def languages(cell) -> set[str]:
    return {t for t in cell.metadata.get("tags", []) if t in ("lang-en", "lang-zh")}


def language(cell):
    """The one language of a prose cell; None for untagged cells and answer cells (tagged with both)."""
    tags = languages(cell)
    return tags.pop() if len(tags) == 1 else None


def ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_prose_comes_in_english_chinese_pairs(path):
    cells = nbformat.read(path, as_version=4).cells
    for index, cell in enumerate(cells):
        if cell.cell_type != "markdown":
            continue
        where = f"{path.name} cell {index}"
        if is_answer_cell(cell):  # the student writes it, in either language
            assert languages(cell) == {"lang-en", "lang-zh"}, f"{where}: tag an answer cell lang-en and lang-zh"
            continue
        lang = language(cell)
        assert lang in ("lang-en", "lang-zh"), f"{where}: tag it lang-en or lang-zh (found {lang})"
        if lang == "lang-en":
            twin = cells[index + 1] if index + 1 < len(cells) else None
            assert twin is not None and language(twin) == "lang-zh", f"{where}: English cell without its Chinese twin"
        else:
            assert index > 0 and language(cells[index - 1]) == "lang-en", f"{where}: Chinese cell without its English twin"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_each_language_is_written_in_its_language(path):
    for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
        text, lang, where = prose(cell), language(cell), f"{path.name} cell {index}"
        if lang == "lang-en":
            assert not CJK.search(text), f"{where}: Chinese text in an English cell"
        elif lang == "lang-zh":
            cjk, latin = len(CJK.findall(text)), len(LATIN.findall(text))
            assert cjk >= 0.3 * (cjk + latin), f"{where}: mostly untranslated ({cjk} Chinese vs {latin} Latin letters)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_chinese_twins_use_the_glossary_terms(path):
    cells = nbformat.read(path, as_version=4).cells
    for index, cell in enumerate(cells[:-1]):
        if language(cell) == "lang-en" and language(cells[index + 1]) == "lang-zh":
            missing = missing_terms(prose(cell), prose(cells[index + 1]))
            assert not missing, f"{path.name} cell {index + 1}: the Chinese text lacks {missing}"


@pytest.fixture(scope="module", params=ASSIGNMENTS)
def regenerated(request, course_folder):
    """The assignment's release generated afresh by nbgrader from the committed source."""
    return request.param, course_folder(request.param, request.param)


@pytest.mark.build_independent  # nbgrader's text of the release; no PyTorch build changes it: .ci/run runs it once
def test_committed_release_is_what_nbgrader_generates(regenerated):
    assignment, course = regenerated
    fresh = nbformat.read(classroom.notebook_path(course, "release", assignment), as_version=4)
    committed = nbformat.read(classroom.notebook_path(ROOT, "release", assignment), as_version=4)
    assert committed == fresh, f"release/{assignment} is stale: run `make release` and commit it"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_contains_no_solution_or_hidden_test(assignment):
    source = nbformat.read(classroom.notebook_path(ROOT, "source", assignment), as_version=4)
    release = nbformat.read(classroom.notebook_path(ROOT, "release", assignment), as_version=4)
    release_text = "\n".join(cell.source for cell in release.cells)
    release_lines = {line.strip() for line in release_text.splitlines()}
    secret = {line for line in hidden_lines(source) if len(line) > 8}
    assert len(secret) > 20  # the check below means something only if there is something to hide
    leaked = [line for line in secret if line in release_lines]
    assert not leaked, f"release/{assignment} leaks: {leaked[:5]}"
    assert "BEGIN HIDDEN" not in release_text and "BEGIN SOLUTION" not in release_text
