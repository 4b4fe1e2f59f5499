"""The real `nbgrader autograde`, run by `course demo` on a class built from each mistake corpus.

Wrong answers must lose exactly their own exercise's points and show the diagnostic in both languages;
right answers in other styles keep every point; the untouched release earns nothing; a broken file is
reported while the rest of the class is graded.
"""
import html
import re
from collections import Counter

import nbformat
import pytest

from course import classroom
from course.classroom import natural_order
from course.plugins.feedback import HideHiddenTests
from support.graders import under_its_demo_build
from support.messages import shows
from support.notebooks import hidden_lines

ASSIGNMENTS = sorted(path.name for path in (classroom.ROOT / "source").iterdir() if path.is_dir())
CORPUS = {assignment: classroom.load_corpus(assignment) for assignment in ASSIGNMENTS}
STUDENTS = {assignment: classroom.students_from_corpus(CORPUS[assignment]) for assignment in ASSIGNMENTS}
# each assignment's demo class, graded under the one build .ci/run grades it under (support/graders.py)
GRADED = [under_its_demo_build(assignment) for assignment in ASSIGNMENTS]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_corpus_covers_every_exercise_with_three_mistakes_and_two_styles(assignment):
    corpus = CORPUS[assignment]
    exercises = {cell.removeprefix("test_") for cell in classroom.max_points(assignment)}
    wrong = Counter(a.exercise for a in corpus if not a.correct)
    right = Counter(a.exercise for a in corpus if a.correct)
    assert set(wrong) == set(right) == exercises
    assert min(wrong.values()) >= 3 and min(right.values()) >= 2
    assert len({a.id for a in corpus}) == len(corpus)
    assert all(a.diagnostic for a in corpus if not a.correct)


@pytest.mark.parametrize("assignment", GRADED)
def test_solution_earns_every_point(demo, assignment):
    assert demo(assignment).graded.scores["solution"] == classroom.max_points(assignment)


@pytest.mark.parametrize("assignment", GRADED)
def test_untouched_release_earns_nothing(demo, assignment):
    run = demo(assignment)
    assert run.graded.scores["untouched"] == dict.fromkeys(classroom.max_points(assignment), 0)
    assert all(shows(shown, "not_answered") for shown in run.graded.diagnostics("untouched").values())


@pytest.mark.parametrize("assignment, student", [under_its_demo_build(a, s, test_id=f"{a}-{s}") for a in ASSIGNMENTS
                                                 for s in STUDENTS[a] if s != "solution"])
def test_each_answer_loses_exactly_its_own_points(demo, assignment, student):
    wrong = {f"test_{a.exercise}" for a in STUDENTS[assignment][student] if not a.correct}
    expected = {cell: 0 if cell in wrong else points for cell, points in classroom.max_points(assignment).items()}
    assert demo(assignment).graded.scores[student] == expected


@pytest.mark.parametrize("assignment, answer", [under_its_demo_build(a, answer, test_id=f"{a}-{answer.id}")
                                                for a in ASSIGNMENTS for answer in CORPUS[a] if not answer.correct])
def test_each_mistake_shows_its_bilingual_diagnostic(demo, assignment, answer):
    student = next(s for s, answers in STUDENTS[assignment].items() if answer in answers)
    shown = demo(assignment).graded.diagnostics(student).get(f"test_{answer.exercise}", "")
    assert shows(shown, answer.diagnostic), f"{answer.id}: expected {answer.diagnostic!r}, shown:\n{shown}"
    english, chinese = (shown.splitlines() + ["", ""])[:2]  # the grader's line, not a traceback, in both languages
    assert english.startswith("AssertionError: ") and re.search(r"[\u4e00-\u9fff]", chinese), shown


@pytest.mark.parametrize("assignment", GRADED)
def test_broken_file_is_reported_and_the_rest_is_graded(demo, assignment):
    run = demo(assignment)
    assert "broken-json" not in run.graded.scores
    assert "! broken-json: not graded" in run.output and "! broken-json：未评分" in run.output
    assert set(run.graded.scores) == set(STUDENTS[assignment]) | {"untouched"}


@pytest.mark.parametrize("assignment", GRADED)
def test_demo_writes_grades_feedback_and_table(demo, assignment):
    run = demo(assignment)
    grades = (run.graded.root / "grades.csv").read_text("utf-8").splitlines()
    assert grades[0].startswith("assignment,duedate,timestamp,student_id")
    assert len(grades) - 1 == len(run.graded.scores) + 1  # nbgrader exports the broken submission too, with no score
    for student in run.graded.scores:
        assert (run.graded.root / "feedback" / student / assignment / f"{assignment}.html").exists(), student
    header = next(line for line in run.output.splitlines() if line.startswith("student"))
    assert header.split() == ["student", *(c.removeprefix("test_") for c in sorted(classroom.max_points(assignment))), "total"]
    table = run.output.splitlines()[run.output.splitlines().index(header):]
    maximum = classroom.max_points(assignment)
    assert table[1].split() == ["max", *(f"{maximum[c]:g}" for c in sorted(maximum)), f"{sum(maximum.values()):g}"]
    listed = [line.split()[0] for line in table[2:2 + len(run.graded.scores)]]
    assert listed == sorted(run.graded.scores, key=natural_order)
    assert sorted(["mistakes-10", "mistakes-2", "styles-1"], key=natural_order) == ["mistakes-2", "mistakes-10", "styles-1"]
    assert shows(run.output, "demo_hand_points"), "the table does not say what is graded by hand / 表格没有说明人工评分的部分"
    total = len(STUDENTS[assignment]) + 2
    assert f"[{total}/{total}]" in run.output


def visible_text(page: str) -> str:
    """What a person reads on an HTML page: tags dropped (syntax highlighting splits code into spans)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


@pytest.mark.parametrize("assignment", GRADED)
def test_feedback_shows_diagnostics_but_no_hidden_test_code(demo, assignment):
    run = demo(assignment)
    source = nbformat.read(classroom.notebook_path(classroom.ROOT, "source", assignment), as_version=4)
    secret = {line for line in hidden_lines(source, regions=["HIDDEN TESTS"]) if len(line) > 8}
    autograded = classroom.notebook_path(run.graded.root, "autograded", assignment, "mistakes-1").read_text("utf-8")
    autograded_lines = {line.strip() for cell in nbformat.reads(autograded, as_version=4).cells
                        for line in cell.source.splitlines()}
    assert len(secret & autograded_lines) > 10  # there was something to hide
    for student in run.graded.scores:
        page = visible_text(classroom.notebook_path(run.graded.root, "feedback", assignment, student)
                            .with_suffix(".html").read_text("utf-8"))
        submitted = classroom.notebook_path(run.graded.root, "submitted", assignment, student).read_text("utf-8")
        own = {line.strip() for cell in nbformat.reads(submitted, as_version=4).cells for line in cell.source.splitlines()}
        shown_lines = {line.strip() for line in page.splitlines()}
        leaked = sorted((secret - own) & shown_lines)  # a student's own line is no leak
        assert not leaked, f"{student}'s feedback shows hidden test code: {leaked[:3]}"
        assert "Traceback (most recent call last)" not in page
        assert all(note in shown_lines for note in HideHiddenTests.placeholder.default_value.split("\n"))
        for cell, shown in run.graded.diagnostics(student).items():
            english, chinese = shown.split("\n")[:2]
            assert english.split(": ", 1)[1][:60] in page and chinese[:40] in page, (student, cell)


@pytest.mark.parametrize("assignment", GRADED)
def test_report_lists_every_answer_with_its_points(demo, course, assignment):
    run = demo(assignment)
    done = course("report", "--root", run.graded.root, "--assignment", assignment, "--reuse", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {line.split()[1]: line.split() for line in done.stdout.splitlines()
            if len(line.split()) > 3 and line.split()[2] in ("right", "wrong")}
    points = classroom.max_points(assignment)
    for answer in CORPUS[assignment]:
        expected = points[f"test_{answer.exercise}"] if answer.correct else 0
        assert float(rows[answer.id][3]) == expected, answer.id
    wrong = sum(not a.correct for a in CORPUS[assignment])
    right = len(CORPUS[assignment]) - wrong
    assert f"{wrong}/{wrong} mistakes caught; {right}/{right} correct answers kept full marks" in done.stdout
