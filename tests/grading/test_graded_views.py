"""A notebook read in the 繁體 view (course/authoring/monolingual.py) is graded by the real `nbgrader autograde`
as the bilingual release is. The views' text itself is tests/unit/test_views.py."""
import nbformat
import pytest

from course import classroom, settings
from course.authoring.monolingual import monolingual

# the views' text, graded as the bilingual release's is (whose grades under each build the attack corpora and every
# solution's verdict check); no PyTorch build changes a view: .ci/run runs it once, under the CUDA build, to even out
# the two runs
pytestmark = pytest.mark.ci_cuda_build_only


def test_a_solved_notebook_viewed_in_traditional_chinese_is_still_gradable(course_folder):
    course = course_folder("a1_tensor_to")
    solved = classroom.solved_notebook(course, "a1_tensor_to")
    classroom.submit(course, "a1_tensor_to", "student", monolingual(solved, "zh-hant"))
    classroom.nbgrader(course, "autograde", "a1_tensor_to")
    graded = classroom.scores(course, "a1_tensor_to")["student"]
    assert graded == classroom.max_points("a1_tensor_to")


def test_an_untouched_traditional_view_grades_as_the_untouched_release(course_folder):
    """The 繁體 view changes the text of tracked cells (stubs, tests, the written answer's stub); the grader takes
    them for the released cells (ViewedAsReleased): the same points and manual-grading flags, cell by cell, as
    the bilingual release, its unanswered written answer scored 0 without a hand grade, and no tamper warning."""
    from nbgrader.api import Gradebook

    course = course_folder("a1_tensor_to")
    released = nbformat.read(classroom.notebook_path(course, "release", "a1_tensor_to"), as_version=4)
    classroom.submit(course, "a1_tensor_to", "bilingual", released)
    classroom.submit(course, "a1_tensor_to", "traditional", monolingual(released, "zh-hant"))
    _, log = classroom.nbgrader(course, "autograde", "a1_tensor_to")
    with Gradebook(settings.gradebook_url(settings.load(course))) as gradebook:
        graded = {student: {g.name: (g.cell.cell_type, g.auto_score, g.needs_manual_grade)
                            for g in gradebook.find_submission_notebook("a1_tensor_to", "a1_tensor_to", student).grades}
                  for student in ("bilingual", "traditional")}
    assert graded["traditional"] == graded["bilingual"]
    written = {name: grade for name, grade in graded["traditional"].items() if grade[0] == "markdown"}
    assert written and all(grade[1:] == (0, False) for grade in written.values()), written
    assert "has changed" not in log, log

