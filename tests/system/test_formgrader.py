"""The instructor grades a written answer in nbgrader's formgrader, in a real browser, as the README says.

The class is the one `course demo` graded (the `demo` fixture), copied, so its written answers wait for
a person. The formgrader runs as a `jupyter server` extension in the copy's root; Chromium comes from
conftest.py. The screenshot of the grading page is the one the README shows (docs/formgrader.png).
"""
import shutil
import time

import pytest
import torch
from nbgrader.api import Gradebook

from course import classroom, settings
from course.plugins.feedback import needs_hand_grading
from support.services import jupyter

pytestmark = pytest.mark.build_independent  # the formgrader's pages; no PyTorch build changes them: .ci/run runs it once

ASSIGNMENT = "a1_tensor_to"
WRITTEN = "written_to_vs_module"
STUDENT = "solution"
ARTIFACTS = classroom.ROOT / "build" / "test-artifacts" / "browser" / f"{'cuda' if torch.version.cuda else 'cpu'}-build"


def test_grading_a_written_answer_in_the_formgrader_changes_the_total(demo, page, tmp_path):
    course = tmp_path / "course"
    shutil.copytree(demo(ASSIGNMENT).graded.root, course)
    db_url = settings.gradebook_url(settings.load(course))
    with Gradebook(db_url) as gradebook:
        before = gradebook.find_submission(ASSIGNMENT, STUDENT).score
        submission = gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, STUDENT).id
    assert WRITTEN in needs_hand_grading(db_url, ASSIGNMENT, STUDENT)

    extension = "--ServerApp.jpserver_extensions=nbgrader.server_extensions.formgrader=True"
    with jupyter("server", course, tmp_path, extension) as server:
        # the formgrader's pages call its API without the token in the URL: send it with every request
        page.set_extra_http_headers({"Authorization": f"token {server['token']}"})
        # the README's way in: Manage Submissions → the assignment → a student → the notebook
        page.goto(f"{server['url']}/formgrader/manage_submissions/{ASSIGNMENT}?token={server['token']}")
        page.get_by_text(STUDENT, exact=True).first.wait_for(timeout=60_000)
        page.goto(f"{server['url']}/formgrader/submissions/{submission}/?token={server['token']}")
        score = page.locator(f"input.score#{WRITTEN}")
        # the inputs are in the page's HTML before its scripts fetch the grades and comments and bind the
        # saving to them: a score typed earlier is never saved (seen under CI load). `formgrader.loaded`:
        # its start-up ran to the end, keyboard shortcuts included, offline too and under the page's
        # Content-Security-Policy (course/plugins/formgrade.py)
        page.wait_for_function("() => formgrader.loaded && formgrader.grades.loaded && formgrader.comments.loaded",
                               timeout=60_000)
        page.locator(f"textarea#{WRITTEN}-comment").fill(
            "Right: Tensor.to returns a new tensor. / 正确：Tensor.to 返回新张量。")
        score.fill("2")
        score.press("Escape")  # the formgrader's shortcut: leave the field, which saves it
        deadline = time.monotonic() + 60
        while needs_hand_grading(db_url, ASSIGNMENT, STUDENT) and time.monotonic() < deadline:
            time.sleep(0.5)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        score.scroll_into_view_if_needed()
        page.screenshot(path=ARTIFACTS / "formgrader.png")

    assert not needs_hand_grading(db_url, ASSIGNMENT, STUDENT)
    with Gradebook(db_url) as gradebook:
        assert gradebook.find_submission(ASSIGNMENT, STUDENT).score == before + 2
        assert gradebook.find_comment(WRITTEN, ASSIGNMENT, ASSIGNMENT, STUDENT).manual_comment.startswith("Right")
