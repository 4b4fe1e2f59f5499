"""The parts of `course insights` (the class on the page and in the CSV: tests/grading/test_insights_demo.py):
what the grader stores with a test cell (and that a submission cannot plant it), the lesson sections the
catalogue points to, and a page that stays inert with a hostile student id.
"""
import csv
import html
import re

import nbformat
import pytest
from conftest import GENERIC_DIAGNOSTICS
from nbformat.v4 import new_code_cell, new_notebook

from autograder.messages import catalogue
from course import classroom, insights
from course.authoring import student_bundle
from course.plugins import autograde

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
    from autograder.verdict import diagnosis

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
    monkeypatch.setattr(autograde.DecideGrades, "verdict", lambda self, cells: records)
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
    assert hostile not in page and html.escape(hostile) in page
    assert "<script" not in page and "default-src 'none'" in page
    table = rows(insights.write_csv("a1", [exercise], tmp_path / "a1.csv"))
    assert table == [{"assignment": "a1", "exercise": "test_to_device", "points": "2.0", "graded": "2", "full_points": "1",
                      "message_key": "forgot_assignment", "hint_key": "", "students": "1", "share": "0.50",
                      "lesson": "02_tensor_to", "section": "Out-of-place: the result must be assigned",
                      "student_ids": hostile}]
