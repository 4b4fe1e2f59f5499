"""`course insights` on the demo classes: per exercise, how many students hit each diagnostic, on the page
and in the CSV. The counts follow from the corpus: student `mistakes-k` writes the k-th wrong answer of
each exercise, whose diagnostic the corpus records, and `untouched` answers nothing.
"""
import csv
import shutil
from collections import defaultdict
from pathlib import Path

import nbformat
import pytest

from course import classroom, insights
from course.authoring import student_bundle
from course.plugins import autograde
from support.graders import demo_build_mark, under_its_demo_build
from support.messages import GENERIC_DIAGNOSTICS

ASSIGNMENTS = student_bundle.assignments()
GRADED = [under_its_demo_build(assignment) for assignment in ASSIGNMENTS]  # each under its class's build in CI
ARTIFACTS = classroom.ROOT / "build" / "test-artifacts" / "browser"


def rows(path) -> list[dict]:
    with open(path, encoding="utf-8") as table:
        return list(csv.DictReader(table))


@pytest.mark.parametrize("assignment", GRADED)
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


@pytest.mark.parametrize("assignment", GRADED)
def test_each_misconception_of_the_corpus_names_the_section_that_teaches_it(demo, assignment):
    for row in rows(demo(assignment).graded.root / "insights" / f"{assignment}.csv"):
        if row["message_key"] not in GENERIC_DIAGNOSTICS or row["hint_key"]:
            assert row["lesson"] and row["section"], row


@demo_build_mark("a2_module_to")
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


@demo_build_mark("a1_tensor_to")
def test_the_page_in_a_browser(demo, page, tmp_path):
    """Chromium shows the class summary first, every exercise's chart, both languages, and a resubmitting
    student's first attempt apart (issue 43), and runs nothing."""
    import json

    root = tmp_path / "course"
    shutil.copytree(demo("a1_tensor_to").graded.root, root)
    student = next(path.parent.parent.name for path in (root / "autograded").glob("*/a1_tensor_to/a1_tensor_to.ipynb"))
    first = Path(autograde.attempts_file(root, "a1_tensor_to", student))
    first.parent.mkdir(parents=True, exist_ok=True)
    first.write_text(json.dumps({"2026-03-01 10:00:00": {"a1_tensor_to": {"test_to_device": {"key": "forgot_assignment"}}},
                                 "2026-03-02 10:00:00": {"a1_tensor_to": {"test_to_device": {}}}}), "utf-8")
    shown, _ = insights.write(root, "a1_tensor_to", root / "insights")
    page.goto(shown.as_uri())
    assert page.locator("svg").count() == len(classroom.max_points("a1_tensor_to"))
    assert page.locator("svg rect").count() > len(classroom.max_points("a1_tensor_to"))
    body = page.inner_text("body")
    assert "What the class got wrong" in body and "全班错在哪里" in body and "not_answered" in body
    summary = page.locator("#summary")
    assert summary.is_visible() and page.locator("#summary li").count() == 3
    assert "Reteach first" in summary.inner_text() and "优先重讲" in summary.inner_text()
    assert summary.bounding_box()["y"] < page.locator("svg").first.bounding_box()["y"]
    attempts = page.locator("#first-attempts")
    assert attempts.is_visible() and student in attempts.inner_text() and "forgot_assignment" in attempts.inner_text()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=ARTIFACTS / "insights-a1.png", full_page=True)


# ------------------------------------------------------------------ the parts, one at a time


@demo_build_mark("a1_tensor_to")
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
