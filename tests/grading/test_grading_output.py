"""What people read from grading: `nbgrader validate` shows diagnostics in full, feedback pages wrap them
and load nothing from the internet, and in the grading log only a changed test cell raises a warning.

The feedback pages and the log are those of `course demo` (the `demo` fixture, shared with
tests/grading/test_grading.py); the browser is the one tests/system/test_browser.py uses (conftest.py).
"""
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import torch

from course import classroom
from support.graders import demo_build_mark
from support.paths import BIN

ASSIGNMENT = "a1_tensor_to"
CHECKSUM_WARNING = re.compile(r"WARNING\] Attribute 'checksum' for cell (\w+) has changed")
FORGOT = next(a for a in classroom.load_corpus(ASSIGNMENT) if a.diagnostic == "forgot_assignment")
HINT = "`x = x.to(device)`"  # how the diagnostic ends, in both languages
ARTIFACTS = classroom.ROOT / "build" / "test-artifacts" / "browser" / f"{'cuda' if torch.version.cuda else 'cpu'}-build"


def student_with(answer) -> str:
    students = classroom.students_from_corpus(classroom.load_corpus(ASSIGNMENT))
    return next(student for student, answers in students.items() if answer in answers)


def test_nbgrader_validate_prints_the_whole_diagnostic_with_its_fix(tmp_path):
    path = tmp_path / f"{ASSIGNMENT}.ipynb"
    nbformat.write(classroom.solved_notebook(classroom.ROOT, ASSIGNMENT, [FORGOT]), path)
    done = subprocess.run([str(BIN / "nbgrader"), "validate", str(path)],
                          cwd=classroom.ROOT, capture_output=True, text=True, timeout=300)
    shown = done.stdout + done.stderr
    lines = [line for line in shown.splitlines() if HINT in line]
    assert any("Assign or return its result" in line for line in lines), shown
    assert any("请把结果赋值或直接返回" in line for line in lines), shown
    assert all(not line.endswith("...") for line in lines)


def feedback_page(demo, student) -> Path:
    return classroom.notebook_path(demo(ASSIGNMENT).graded.root, "feedback", ASSIGNMENT, student).with_suffix(".html")


@demo_build_mark(ASSIGNMENT)
def test_feedback_loads_no_script_or_style_from_the_internet(demo):
    for student in demo(ASSIGNMENT).graded.scores:
        page = feedback_page(demo, student).read_text("utf-8")
        remote = re.findall(r"<(?:script|link|img|iframe)\b[^>]*(?:src|href)=[\"']?(?:https?:)?//[^>]*>", page)
        assert not remote, f"{student}'s feedback loads {remote}"
        assert "<style" in page  # the page's CSS is inlined instead


@demo_build_mark(ASSIGNMENT)
def test_feedback_diagnostic_wraps_inside_the_browser_window(demo, page):
    width = 900
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(feedback_page(demo, student_with(FORGOT)).as_uri())
    page.locator("pre", has_text="请把结果赋值或直接返回").first.wait_for()
    # where each occurrence of a text is drawn: its right edge and the number of lines it spans
    where = """(text) => {
        const found = [], walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
        while (walker.nextNode()) {
            const node = walker.currentNode;
            for (let at = node.data.indexOf(text); at >= 0; at = node.data.indexOf(text, at + 1)) {
                const range = document.createRange();
                range.setStart(node, at);
                range.setEnd(node, at + text.length);
                const tops = new Set([...range.getClientRects()].map((rect) => Math.round(rect.top)));
                found.push({right: range.getBoundingClientRect().right + window.scrollX, lines: tops.size});
            }
        }
        return found;
    }"""
    fix = page.evaluate(where, HINT)  # the English and the Chinese line
    assert len(fix) >= 2, fix
    assert max(f["right"] for f in fix) <= width, fix
    # lines break between words (or Chinese characters), never inside code such as `Tensor.to`
    for word in ["x.to(device)", "Tensor.to"]:
        found = page.evaluate(where, word)
        assert found and all(f["lines"] == 1 for f in found), (word, found)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("pre", has_text=HINT).first.scroll_into_view_if_needed()
    page.screenshot(path=ARTIFACTS / "feedback-wrapped-diagnostic.png")


@demo_build_mark(ASSIGNMENT)
def test_grading_log_warns_only_about_test_cells_that_were_changed(demo, tmp_path):
    graded = demo(ASSIGNMENT).graded
    honest_log = (graded.root / "autograde.log").read_text("utf-8")
    assert "Sanitizing" in honest_log and not CHECKSUM_WARNING.search(honest_log)  # a class of honest students

    course = tmp_path / "course"
    shutil.copytree(graded.root, course, ignore=shutil.ignore_patterns("autograded", "feedback"))
    tampered = classroom.solved_notebook(course, ASSIGNMENT)
    test_cell = next(c for c in tampered.cells if classroom.grade_id(c) == "test_to_device")
    test_cell.source = 'print("to_device: tests passed / 测试通过")'
    classroom.submit(course, ASSIGNMENT, "mallory", tampered)
    _, log = classroom.nbgrader(course, "autograde", ASSIGNMENT, "--student", "mallory")
    assert CHECKSUM_WARNING.findall(log) == ["test_to_device"], log
