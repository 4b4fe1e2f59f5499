"""`course insights`: per exercise, how many students hit each diagnostic, on the page and in the CSV.

On the demo class the counts follow from the corpus: student `mistakes-k` writes the k-th wrong answer
of each exercise, whose diagnostic the corpus records, and `untouched` answers nothing. The unit tests
below check the parts: what the grader stores with a test cell (and that a submission cannot plant it),
the lesson sections the catalogue points to, and a page that stays inert with a hostile student id.
"""
import csv
import html
import re
import shutil
from collections import defaultdict

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.messages import catalogue
from course import classroom, insights
from course.authoring import student_bundle
from course.plugins import autograde

ASSIGNMENTS = student_bundle.assignments()
# diagnostics that say what went wrong but not which point of the course: no one section teaches them
GENERIC = {"raised", "wrong_values", "wrong_shape", "not_answered", "expected_error", "expected_none", "not_a_module",
           "not_a_tensor"}


def rows(path) -> list[dict]:
    with open(path, encoding="utf-8") as table:
        return list(csv.DictReader(table))


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_demo_counts_follow_from_the_corpus(demo, assignment):
    run = demo(assignment)
    assert "insights/" in run.output  # `course demo` wrote and named the page
    found = rows(run.graded.root / "insights" / f"{assignment}.csv")
    students = classroom.students_from_corpus(classroom.load_corpus(assignment))
    causes = defaultdict(set)  # (exercise, student) → the keys of the row that names the student
    for row in found:
        for student in row["student_ids"].split():
            assert not causes[(row["exercise"], student)], f"{student} counted twice for {row['exercise']}"
            causes[(row["exercise"], student)] = {row["message_key"], row["hint_key"]}
        assert int(row["students"]) == len(row["student_ids"].split())
    for student, answers in students.items():
        for answer in answers:
            if not answer.correct:
                assert answer.diagnostic in causes[(f"test_{answer.exercise}", student)], (student, answer.id)
    exercises = set(classroom.max_points(assignment))
    for exercise in exercises:
        assert causes[(exercise, classroom.UNTOUCHED)] == {"not_answered", ""}
        here = [row for row in found if row["exercise"] == exercise]
        graded, full = int(here[0]["graded"]), int(here[0]["full_points"])
        assert graded == len(run.graded.scores)  # every readable submission; the broken file is not graded
        assert graded - full == sum(int(row["students"]) for row in here)
        assert full == sum(run.graded.scores[s][exercise] == classroom.max_points(assignment)[exercise]
                           for s in run.graded.scores)
    assert {row["exercise"] for row in found} == exercises


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_misconception_of_the_corpus_names_the_section_that_teaches_it(demo, assignment):
    for row in rows(demo(assignment).graded.root / "insights" / f"{assignment}.csv"):
        if row["message_key"] not in GENERIC or row["hint_key"]:
            assert row["lesson"] and row["section"], row


def test_course_insights_writes_the_page_and_the_table_for_a_course_folder(demo, course, tmp_path):
    root = demo("a2_module_to").graded.root
    done = course("insights", "a2_module_to", "--root", root, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    page, table = tmp_path / "a2_module_to.html", tmp_path / "a2_module_to.csv"
    assert str(page) in done.stdout and "全班错在哪里" in done.stdout
    assert rows(table) == rows(root / "insights" / "a2_module_to.csv")
    shown = page.read_text("utf-8")
    assert shown.count("<svg") == len(classroom.max_points("a2_module_to"))
    assert "Lesson 3 § What stays behind" in shown and "第 3 课 § 哪些会留在原处" in shown


def test_the_page_in_a_browser(demo, page):
    """Chromium shows every exercise's chart and both languages, and runs nothing."""
    root = demo("a1_tensor_to").graded.root
    page.goto((root / "insights" / "a1_tensor_to.html").as_uri())
    assert page.locator("svg").count() == len(classroom.max_points("a1_tensor_to"))
    assert page.locator("svg rect").count() > len(classroom.max_points("a1_tensor_to"))
    body = page.inner_text("body")
    assert "What the class got wrong" in body and "全班错在哪里" in body and "not_answered" in body


# ------------------------------------------------------------------ the parts, one at a time



@pytest.mark.unit
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


@pytest.mark.unit
def test_the_verdict_names_only_keys_of_the_catalogue():
    from autograder.verdict import diagnosis

    assert diagnosis({"key": "wrong_dtype", "fields": {"hint": {"text": "dtype_hint_keep"}}}) == \
        {"key": "wrong_dtype", "hint": "dtype_hint_keep"}
    assert diagnosis({"key": "wrong_dtype", "fields": {"hint": {"str": "dtype_hint_keep"}}}) == {"key": "wrong_dtype"}
    assert diagnosis({"key": "made_up", "fields": {}}) == {"key": "verdict_failed"}
    assert diagnosis({"key": "wrong_dtype", "fields": {"hint": {"text": "made_up"}}}) == {"key": "wrong_dtype"}


@pytest.mark.unit
def test_a_submission_cannot_plant_a_diagnosis(monkeypatch):
    """The grader replaces what a test cell's metadata claims with its own records, passed or not."""
    cells = [new_code_cell("assert True", metadata={"nbgrader": {"grade": True, "grade_id": grade_id, "points": 1},
                                                    autograde.DIAGNOSIS: {"key": "not_answered"}})
             for grade_id in ("test_a", "test_b")]
    records = {"test_a": {"passed": True}, "test_b": {"passed": False, "key": "wrong_device", "message": "…"}}
    monkeypatch.setattr(autograde.DecideGrades, "verdict", lambda self, cells, tests: records)
    notebook, _ = autograde.DecideGrades().preprocess(new_notebook(cells=cells), {})
    assert autograde.DIAGNOSIS not in notebook.cells[0].metadata
    assert notebook.cells[1].metadata[autograde.DIAGNOSIS] == {"key": "wrong_device"}


@pytest.mark.unit
def test_stored_diagnoses_read_only_keys_of_the_catalogue(tmp_path):
    cell = lambda grade_id, stored: new_code_cell("", metadata={"nbgrader": {"grade_id": grade_id}, autograde.DIAGNOSIS: stored})
    path = tmp_path / "nb.ipynb"
    nbformat.write(new_notebook(cells=[cell("a", {"key": "wrong_device", "hint": "made_up"}),
                                       cell("b", {"key": "<script>"}), cell("c", "not a dict")]), path)
    assert insights.stored_diagnoses(path) == {"a": {"key": "wrong_device", "hint": None}}


@pytest.mark.unit
def test_every_section_the_catalogue_points_to_is_a_heading_of_its_lesson_in_both_languages():
    for key, where in insights.teaches().items():
        assert key in catalogue(), key
        assert (classroom.ROOT / "notebooks" / f"{where['lesson']}.ipynb").exists(), where
        found = insights.section(key, None)
        assert found["en"] == where["section"] and found["zh"], (key, where)
        assert re.search(r"[\u4e00-\u9fff]", found["zh"]), found


@pytest.mark.unit
def test_every_diagnostic_of_the_corpora_is_either_generic_or_taught_somewhere():
    for assignment in ASSIGNMENTS:
        for answer in classroom.load_corpus(assignment):
            diagnostic = answer.diagnostic
            if diagnostic and diagnostic not in GENERIC and diagnostic != "wrong_dtype":  # wrong_dtype: by its hint
                assert diagnostic in insights.teaches(), (assignment, answer.id, diagnostic)


def test_a_class_graded_before_the_keys_were_stored_says_so(demo, tmp_path):
    """Autograded notebooks without stored keys (an older class): counted, and named as not recorded."""
    root = tmp_path / "course"
    shutil.copytree(demo("a1_tensor_to").graded.root, root)
    for path in (root / "autograded").glob("*/a1_tensor_to/a1_tensor_to.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            cell.metadata.pop(autograde.DIAGNOSIS, None)
        nbformat.write(notebook, path)
    _, table = insights.write(root, "a1_tensor_to", tmp_path / "out")
    found = rows(table)
    assert found and {row["message_key"] for row in found} == {insights.NOT_RECORDED}


@pytest.mark.unit
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
