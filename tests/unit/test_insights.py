"""The parts of `course insights` (the class on the page and in the CSV: tests/grading/test_insights_demo.py):
what the grader stores with a test cell (and that a submission cannot plant it), the lesson sections the
catalogue points to, and a page that stays inert with a hostile student id.
"""
import csv
import html
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.messages import catalogue
from course import classroom, insights
from course.authoring import student_bundle
from course.plugins import autograde
from support.messages import GENERIC_DIAGNOSTICS

ASSIGNMENTS = student_bundle.assignments()


def rows(path) -> list[dict]:
    with open(path, encoding="utf-8") as table:
        return list(csv.DictReader(table))


# ------------------------------------------------------------------ the parts, one at a time


@pytest.mark.parametrize("record, kernel_error, expected", [
    ({"passed": True}, None, {}),
    ({"passed": True}, "ZeroDivisionError: division by zero", {"key": "own_run_failed"}),
    ({"passed": False, "key": "wrong_dtype", "hint": "dtype_hint_keep", "message": "…"}, None,
     {"key": "wrong_dtype", "hint": "dtype_hint_keep"}),
    ({"passed": False, "key": "timed_out"}, None, {"key": "timed_out"}),
    (None, None, {"key": "verdict_missing"}),
], ids=["passed", "own-run-failed", "key-and-hint", "timed-out", "no-record"])
def test_the_grader_names_why_a_test_cell_lost_its_points(record, kernel_error, expected):
    assert autograde.diagnosis(record, kernel_error) == expected


def test_the_verdict_names_only_keys_of_the_catalogue():
    from autograder.diagnostics import diagnosis

    assert diagnosis({"key": "wrong_dtype", "fields": {"hint": {"text": "dtype_hint_keep"}}}) == \
        {"key": "wrong_dtype", "hint": "dtype_hint_keep"}
    assert diagnosis({"key": "wrong_dtype", "fields": {"hint": {"str": "dtype_hint_keep"}}}) == {"key": "wrong_dtype"}
    assert diagnosis({"key": "made_up", "fields": {}}) == {"key": "verdict_failed"}
    assert diagnosis({"key": "wrong_dtype", "fields": {"hint": {"text": "made_up"}}}) == {"key": "wrong_dtype"}


def test_a_submission_cannot_plant_a_diagnosis(monkeypatch):
    """The grader replaces what a test cell's metadata claims with its own records, passed or not."""
    cells = [new_code_cell("assert True", metadata={"nbgrader": {"grade": True, "grade_id": grade_id, "points": 1},
                                                    autograde.DIAGNOSIS: {"key": "not_answered"}})
             for grade_id in ("test_a", "test_b")]
    records = {"test_a": {"passed": True}, "test_b": {"passed": False, "key": "wrong_device", "message": "…"}}
    monkeypatch.setattr(autograde.DecideGrades, "verdict", lambda self, cells, references=None, **limits: records)
    notebook, _ = autograde.DecideGrades().preprocess(new_notebook(cells=cells), {})
    assert autograde.DIAGNOSIS not in notebook.cells[0].metadata
    assert notebook.cells[1].metadata[autograde.DIAGNOSIS] == {"key": "wrong_device"}


def test_stored_diagnoses_read_only_keys_of_the_catalogue(tmp_path):
    cell = lambda grade_id, stored: new_code_cell("", metadata={"nbgrader": {"grade_id": grade_id}, autograde.DIAGNOSIS: stored})
    path = tmp_path / "nb.ipynb"
    nbformat.write(new_notebook(cells=[cell("a", {"key": "wrong_device", "hint": "made_up"}),
                                       cell("b", {"key": "<script>"}), cell("c", "not a dict")]), path)
    assert insights.stored_diagnoses(path) == {"a": {"key": "wrong_device", "hint": None}}


def test_every_section_the_catalogue_points_to_is_a_heading_of_its_lesson_in_both_languages():
    for key, where in insights.teaches().items():
        assert key in catalogue(), key
        assert (classroom.ROOT / "notebooks" / f"{where['lesson']}.ipynb").exists(), where
        assert where["section_zh"] == insights.chinese_heading(where["lesson"], where["section"]), (key, where)
        assert re.search(r"[\u4e00-\u9fff]", where["section_zh"]), where


def test_sections_are_bilingual_where_the_lessons_are_not_installed(monkeypatch, tmp_path):
    """The shared install (deploy/exchange/install-shared.sh) has the package, not notebooks/ (issue 43)."""
    monkeypatch.setattr(insights, "LESSONS", tmp_path / "no-lessons-here")
    for key in insights.teaches():
        found = insights.section(key, None)
        assert found["zh"] and re.search(r"[\u4e00-\u9fff]", found["zh"]), (key, found)


def test_every_diagnostic_of_the_corpora_is_either_generic_or_taught_somewhere():
    for assignment in ASSIGNMENTS:
        for answer in classroom.load_corpus(assignment):
            diagnostic = answer.diagnostic
            if diagnostic and diagnostic not in GENERIC_DIAGNOSTICS and diagnostic != "wrong_dtype":  # wrong_dtype: by its hint
                assert diagnostic in insights.teaches(), (assignment, answer.id, diagnostic)


def test_the_page_escapes_student_ids_and_runs_no_script(tmp_path):
    hostile = '<img src=x onerror="alert(1)">'
    exercise = insights.Exercise("test_to_device", 2.0, graded=["ada", hostile], full=["ada"])
    exercise.causes[("forgot_assignment", None)].append(hostile)
    page = insights.write_html("a1", [exercise], tmp_path / "a1.html").read_text("utf-8")
    assert hostile not in page and "<img" not in page and hostile in html.unescape(page)
    assert "<script" not in page and "default-src 'none'" in page
    table = rows(insights.write_csv("a1", [exercise], tmp_path / "a1.csv"))
    assert table == [{"assignment": "a1", "exercise": "test_to_device", "points": "2.0", "graded": "2", "full_points": "1",
                      "message_key": "forgot_assignment", "hint_key": "", "students": "1", "share": "0.50",
                      "lesson": "02_tensor_to", "section": "Out-of-place: the result must be assigned",
                      "student_ids": hostile}]


HOSTILE = '</code><script>alert(1)</script><img src=x onerror="alert(2)">'


@pytest.mark.parametrize("place", ["assignment", "grade id", "student id", "heading", "first attempt"])
def test_every_text_on_the_page_is_escaped_wherever_it_comes_from(place, tmp_path, monkeypatch):
    """The page is autoescaped as a whole: a hostile name or heading shows as text in each place it enters."""
    if place == "heading":
        taught = {**insights.teaches(), "forgot_assignment": dict(insights.teaches()["forgot_assignment"],
                                                                   section=HOSTILE, section_zh=HOSTILE)}
        monkeypatch.setattr(insights, "teaches", lambda: taught)
    student = HOSTILE if place in ("student id", "first attempt") else "ada"
    exercise = insights.Exercise(HOSTILE if place == "grade id" else "test_to_device", 2.0, graded=[student, "bo"])
    exercise.causes[("forgot_assignment", None)].append(student)
    exercise.lost[student] = 2.0
    first = [insights.FirstAttempt(student, "test_to_device", "forgot_assignment", None, {})] if place == "first attempt" else []
    page = insights.write_html(HOSTILE if place == "assignment" else "a1", [exercise], tmp_path / "a1.html",
                               first).read_text("utf-8")
    assert "<script" not in page and "<img" not in page and HOSTILE not in page
    assert HOSTILE in html.unescape(page)


def test_the_summary_ranks_misconceptions_by_the_points_they_cost_the_whole_class():
    """A teacher's Monday (issue 43): the three misconceptions that cost the most points over every exercise,
    each with its lesson section; an unanswered exercise is not a misconception."""
    def exercise(grade_id, points, causes):
        found = insights.Exercise(grade_id, points, graded=["a", "b", "c", "d"])
        for cause, students in causes.items():
            found.causes[cause] = students
            found.lost.update({student: points for student in students})
        return found

    exercises = [
        exercise("test_to_device", 2, {("forgot_assignment", None): ["a", "b"], ("not_answered", None): ["c", "d"]}),
        exercise("test_match", 3, {("forgot_assignment", None): ["c"], ("device_mismatch", None): ["a", "b"]}),
        exercise("test_pick_device", 1, {("wrong_device_type", "device_hint_order"): ["a"],
                                         ("not_a_device", None): ["b", "c", "d"]}),
    ]
    ranked = insights.costliest(exercises)
    assert [(m.key, m.points, sorted(m.students)) for m in ranked] == [
        ("forgot_assignment", 7, ["a", "b", "c"]), ("device_mismatch", 6, ["a", "b"]), ("not_a_device", 3, ["b", "c", "d"])]
    assert ranked[0].exercises == ["test_to_device", "test_match"]
    shown = insights.class_summary(exercises)
    assert shown.index("<b>7 points") < shown.index("<b>6 points") < shown.index("<b>3 points")
    where = insights.section("forgot_assignment", None)
    assert where["en"] in shown and where["zh"] in shown and "7 points" in shown and "3 of 4 students" in shown
    assert "not_answered" not in shown and "优先重讲" in shown


def test_the_page_starts_with_the_summary(tmp_path):
    exercise = insights.Exercise("test_to_device", 2, graded=["a"])
    exercise.causes[("forgot_assignment", None)] = ["a"]
    exercise.lost["a"] = 2
    shown = insights.write_html("a1_tensor_to", [exercise], tmp_path / "a1.html").read_text("utf-8")
    assert shown.index('id="summary"') < shown.index("<svg")


def test_a_students_first_attempt_is_kept_apart_from_the_latest(tmp_path):
    """A resubmission replaces the autograded notebook; the grader's attempts/ file keeps the first one's
    mistakes (issue 43), and the page shows them apart from the counts of the latest attempts."""
    import json

    def record(student, attempts):
        path = Path(insights.attempts_file(tmp_path, "a1_tensor_to", student))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(attempts), "utf-8")

    record("ann", {"2026-03-01 10:00:00": {"a1_tensor_to": {"test_to_device": {"key": "forgot_assignment"},
                                                            "test_match": {}}},
                   "2026-03-02 09:00:00": {"a1_tensor_to": {"test_to_device": {}, "test_match": {}}}})
    record("bo", {"2026-03-01 11:00:00": {"a1_tensor_to": {"test_to_device": {"key": "forgot_assignment"}}}})
    record("cy", {"2026-03-03 08:00:00": {"a1_tensor_to": {"test_match": {"key": "device_mismatch"}}},
                  "2026-03-01 08:00:00": {"a1_tensor_to": {"test_match": {"key": "not_a_device", "hint": "made_up"}}}})
    found = insights.first_attempts(tmp_path, "a1_tensor_to")
    assert [(a.student, a.grade_id, a.key, a.hint, a.now) for a in found] == [
        ("ann", "test_to_device", "forgot_assignment", None, {}),
        ("cy", "test_match", "not_a_device", None, {"key": "device_mismatch"})]  # bo submitted once
    shown = insights.first_attempts_html(found)
    assert "<td>ann</td>" in shown and "✓ all points" in shown and "device_mismatch" in shown and "<td>bo</td>" not in shown
    assert "第一次提交" in shown
    page = insights.write_html("a1_tensor_to", [], tmp_path / "a1.html", found).read_text("utf-8")
    assert 'id="first-attempts"' in page
