"""The course's nbgrader plugins one at a time, in nbgrader's own style: `preprocess(nb, resources)` on a
small notebook, with a gradebook in a temporary folder where a plugin reads one. No kernel runs here
(the grading pipeline tests run them all together under `nbgrader autograde`); these take a second.
"""
import logging
import time
import traceback
import shutil
from pathlib import Path

import pytest
import nbformat
from nbformat import validate
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from nbgrader.api import Gradebook

from course.authoring.monolingual import to_traditional
from course.terminal import SHOWN_OF_A_KIND
from course.plugins.autograde import (DECIDING_PAST_THE_BOUND, DropMalformedMetadata, ForgetUnknownCells,
                                     RestoreInstructorsCells, SafeExecute, ViewedAsReleased)
from course.plugins.feedback import HideHiddenTests, RequireHandGrading, WrapDiagnostics
from support.messages import shows
from support.paths import with_bin_on_path


def graded_cell(source, grade_id, points=2, solution=False, **kind):
    return new_code_cell(source, metadata={"nbgrader": {
        "grade": not solution, "solution": solution, "locked": not solution, "grade_id": grade_id,
        "points": points, "schema_version": 3, **kind}})


@pytest.fixture(scope="module")
def gradebook_file(tmp_path_factory) -> Path:
    """The gradebook every test of this file starts from, made once: nbgrader creates a gradebook through
    alembic, seconds each time."""
    path = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("PATH", with_bin_on_path()["PATH"])  # alembic
        with Gradebook(f"sqlite:///{path}") as book:
            book.add_assignment("a1")
            book.add_notebook("nb", "a1")
            # the source's cells in order: the instructor's imports, a test, the instructor's helper, an answer
            book.add_source_cell("imports", "nb", "a1", cell_type="code", locked=True, source="import torch")
            book.add_grade_cell("test_move", "nb", "a1", max_score=2, cell_type="code")
            book.add_source_cell("test_move", "nb", "a1", cell_type="code", locked=True, source="assert True")
            book.add_source_cell("helpers", "nb", "a1", cell_type="code", locked=True, source="LAYERS = (1, 2)")
            book.add_grade_cell("written", "nb", "a1", max_score=2, cell_type="markdown")
            book.add_source_cell("written", "nb", "a1", cell_type="markdown", locked=False, source="")
            book.add_student("ada")
            book.add_submission("a1", "ada")
            for name in ("test_move", "written"):  # as autograde leaves them, before anyone grades by hand
                book.find_grade(name, "nb", "a1", "ada").needs_manual_grade = False
            book.db.commit()
    return path


@pytest.fixture
def gradebook(gradebook_file, tmp_path, monkeypatch):
    """A gradebook of its own for each test (a copy), that knows one notebook of one assignment, with one
    test cell and one written answer."""
    monkeypatch.setenv("PATH", with_bin_on_path()["PATH"])  # alembic
    shutil.copy(gradebook_file, tmp_path / "gradebook.db")
    return f"sqlite:///{tmp_path / 'gradebook.db'}"


def resources(db_url="", student="ada"):
    return {"nbgrader": {"db_url": db_url, "assignment": "a1", "notebook": "nb", "student": student}}


@pytest.mark.parametrize("claimed", ["a string", {"grade_id": 7}, {"grade_id": "t", "grade": "yes"},
                                     {"grade_id": "t", "grade": True, "points": "lots"}])
def test_malformed_nbgrader_metadata_is_dropped_and_the_cell_kept(claimed, caplog):
    cell = new_code_cell("print(1)", metadata={"nbgrader": claimed})
    nb, _ = DropMalformedMetadata().preprocess(new_notebook(cells=[cell]), {})
    assert "nbgrader" not in nb.cells[0].metadata and nb.cells[0].source == "print(1)"
    assert "malformed nbgrader metadata" in caplog.text


def test_well_formed_metadata_is_kept():
    nb, _ = DropMalformedMetadata().preprocess(new_notebook(cells=[graded_cell("assert True", "test_move")]), {})
    assert nb.cells[0].metadata["nbgrader"]["grade_id"] == "test_move"


def test_a_cell_claiming_an_unknown_grade_id_becomes_an_ordinary_cell(gradebook, caplog):
    forged = graded_cell("print('tests passed')", "test_forged", points=100)
    known = graded_cell("assert True", "test_move")
    nb, _ = ForgetUnknownCells().preprocess(new_notebook(cells=[forged, known]), resources(gradebook))
    assert "nbgrader" not in nb.cells[0].metadata
    assert nb.cells[1].metadata["nbgrader"]["grade_id"] == "test_move"
    assert "unknown grade id 'test_forged'" in caplog.text


@pytest.mark.parametrize("claimed", ["unknown grade ids", "malformed metadata"])
def test_many_cells_claiming_what_they_are_not_take_a_few_lines_of_the_log(gradebook, claimed):
    """200,000 cells claiming unknown grade ids made as many warning lines (a hostile student's, the twenty-first
    session), and 20,000 of malformed metadata (the twenty-second): a few lines of each kind, as `course grade` keeps
    each student's log (course.terminal.FewOfAKind)."""
    from course.grading.logs import GradingLog

    if claimed == "unknown grade ids":
        preprocessor, cells = ForgetUnknownCells(), [graded_cell("", f"forged_{index}") for index in range(500)]
    else:
        preprocessor, cells = DropMalformedMetadata(), [new_code_cell("", metadata={"nbgrader": "x"}) for _ in range(500)]
    with GradingLog() as log:
        nb, _ = preprocessor.preprocess(new_notebook(cells=cells), resources(gradebook))
    assert all("nbgrader" not in cell.metadata for cell in nb.cells)
    assert len(log.records) == SHOWN_OF_A_KIND + 1 and "are not shown for this notebook" in log.text().splitlines()[-1]


FLAGS = ("grade", "solution", "locked", "task")


@pytest.mark.parametrize("grade_id, changed, source_flags", [
    ("test_move", {"grade": False}, (True, False, True, False)),
    ("test_move", {"solution": True, "locked": False}, (True, False, True, False)),
    ("test_move", {"task": True}, (True, False, True, False)),
    ("imports", {"grade": True, "points": 5}, (False, False, True, False)),
])
def test_a_known_cell_claiming_other_flags_gets_the_sources_back(gradebook, caplog, grade_id, changed, source_flags):
    """A flag any editor changes (nbgrader's own toolbar too) left the notebook ungraded, with nbgrader's raw error
    (a hostile student's, the twenty-first session); the cell is graded as the cell the source made it, where it is."""
    cell = graded_cell("assert True", grade_id) if grade_id.startswith("test") else instructors_cell("import torch", grade_id)
    cell.metadata["nbgrader"].update(changed)
    nb, _ = ForgetUnknownCells().preprocess(new_notebook(cells=[cell]), resources(gradebook))
    kept = nb.cells[0].metadata["nbgrader"]
    assert tuple(kept[flag] for flag in FLAGS) == source_flags and kept["grade_id"] == grade_id
    assert ("points" in kept) == source_flags[0]
    assert f"claims grade id '{grade_id}' with other flags than the source's" in caplog.text


def instructors_cell(source, grade_id):
    return new_code_cell(source, metadata={"nbgrader": {"grade": False, "solution": False, "locked": True,
                                                        "grade_id": grade_id, "schema_version": 3}})


def grade_ids(nb) -> list:
    return [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells]


@pytest.mark.parametrize("kept, restored", [
    (["imports", "test_move", "helpers"], []),
    (["test_move", "helpers"], ["imports"]),
    (["imports", "test_move"], ["helpers"]),
    (["test_move"], ["imports", "helpers"]),
])
def test_an_instructors_cell_the_submission_lacks_is_put_back_where_the_source_holds_it(gradebook, caplog, kept, restored):
    cells = {"imports": instructors_cell("import torch", "imports"), "test_move": graded_cell("assert True", "test_move"),
             "helpers": instructors_cell("LAYERS = (1, 2)", "helpers")}
    answer = new_code_cell("def move(x):\n    return x")  # a student's cell, after the test here
    nb, _ = RestoreInstructorsCells().preprocess(new_notebook(cells=[cells[k] for k in kept] + [answer]),
                                                 resources(gradebook))
    assert grade_ids(nb) == ["imports", "test_move", "helpers", None]
    assert nb.cells[-1].source == answer.source
    for cell in nb.cells[:3]:
        name = cell.metadata.nbgrader["grade_id"]
        if name in restored:
            assert cell.source.endswith(cells[name].source) and shows(cell.source, "instructors_cell_restored")
            assert cell.metadata.nbgrader["locked"] and not cell.metadata.nbgrader["grade"]
            assert shows(caplog.text, "instructors_cell_restored_log")
        else:
            assert cell is cells[name]
    assert bool(restored) == ("missing from the submission" in caplog.text)


def test_a_deleted_test_or_answer_is_not_this_steps_to_put_back(gradebook):
    """OverwriteCells (add_missing_cells) puts back test cells; an answer is the student's to delete."""
    nb, _ = RestoreInstructorsCells().preprocess(new_notebook(cells=[]), resources(gradebook))
    assert grade_ids(nb) == ["imports", "helpers"]


WRITTEN_STUB = "YOUR ANSWER HERE / 在此处作答"


@pytest.fixture
def gradebook_with_chinese(gradebook):
    """The gradebook's written answer released with a 简体 stub, as ClearSolutions leaves it."""
    with Gradebook(gradebook) as book:
        book.find_source_cell("written", "nb", "a1").source = WRITTEN_STUB
        book.db.commit()
    return gradebook


def written_answer(source):
    return new_markdown_cell(source, metadata={"nbgrader": {
        "grade": True, "solution": True, "locked": False, "grade_id": "written", "points": 2, "schema_version": 3}})


def test_a_cell_as_the_traditional_view_shows_it_is_the_released_cell(gradebook_with_chinese):
    viewed = written_answer(to_traditional(WRITTEN_STUB))
    assert viewed.source != WRITTEN_STUB  # 处 is 简体: the view changes the stub
    nb, _ = ViewedAsReleased().preprocess(new_notebook(cells=[viewed]), resources(gradebook_with_chinese))
    assert nb.cells[0].source == WRITTEN_STUB  # unanswered, as nbgrader's checksum will find


@pytest.mark.parametrize("source", [to_traditional(WRITTEN_STUB) + "\n因為 `.to` 傳回新的張量。", "我的答案", ""])
def test_a_cell_the_student_changed_keeps_its_text(gradebook_with_chinese, source):
    nb, _ = ViewedAsReleased().preprocess(new_notebook(cells=[written_answer(source)]), resources(gradebook_with_chinese))
    assert nb.cells[0].source == source


def test_feedback_hides_the_hidden_tests_and_their_traceback():
    source = "check(a)\n    ### BEGIN HIDDEN TESTS\n    check(secret)\n    ### END HIDDEN TESTS\nprint('done')"
    test = graded_cell(source, "test_move")
    test.outputs = [new_output("error", ename="AssertionError", evalue="x: expected cpu, found meta",
                               traceback=["Traceback", "----> check(secret)", "AssertionError: ..."])]
    answer = graded_cell("### BEGIN HIDDEN TESTS\nkept()", "move", solution=True)
    nb, _ = HideHiddenTests().preprocess(new_notebook(cells=[test, answer]), {})
    shown = nb.cells[0]
    assert "secret" not in shown.source and shown.source.startswith("check(a)\n    # (hidden tests ran here")
    assert shown.source.endswith("\n    # （隐藏测试已在此运行：结果见下方）\nprint('done')")  # each line indented
    assert shown.outputs[0].traceback == ["AssertionError: x: expected cpu, found meta"]
    assert nb.cells[1].source == "### BEGIN HIDDEN TESTS\nkept()"  # only test cells hold hidden tests


def test_feedback_pages_wrap_long_diagnostics():
    _, shown = WrapDiagnostics().preprocess(new_notebook(), {"inlining": {"css": ["p {}"]}})
    assert shown["inlining"]["css"][0] == "p {}" and "white-space: pre-wrap" in shown["inlining"]["css"][1]


def test_no_feedback_while_a_written_answer_waits_for_the_formgrader(gradebook, caplog):
    with Gradebook(gradebook) as book:  # the written answer waits for a person
        book.find_grade("written", "nb", "a1", "ada").needs_manual_grade = True
        book.db.commit()
    with pytest.raises(RuntimeError) as refused:
        RequireHandGrading().preprocess(new_notebook(), resources(gradebook))
    assert shows(str(refused.value), "feedback_ungraded") and "(written)" in str(refused.value)
    with caplog.at_level(logging.WARNING):
        RequireHandGrading(allow_ungraded=True).preprocess(new_notebook(), resources(gradebook))
    assert shows(caplog.text, "feedback_shows_ungraded")


def test_feedback_held_back_is_logged_as_its_reason_not_a_traceback(gradebook, caplog):
    """nbgrader logs `traceback.format_exc()` for an error in a preprocessor: for feedback held back on
    purpose the log shows the reason alone; any other traceback stays whole."""
    with Gradebook(gradebook) as book:
        book.find_grade("written", "nb", "a1", "ada").needs_manual_grade = True
        book.db.commit()
    log = logging.getLogger("GenerateFeedbackApp-test")
    plugin = RequireHandGrading(log=log)
    with caplog.at_level(logging.ERROR, logger=log.name):
        for error in (None, ValueError("a real bug")):
            try:
                if error:
                    raise error
                plugin.preprocess(new_notebook(), resources(gradebook))
            except Exception:  # noqa: BLE001: as nbgrader's converter does
                log.error(traceback.format_exc())
    held_back, other = [record.getMessage() for record in caplog.records]
    assert shows(held_back, "feedback_ungraded") and "Traceback" not in held_back, held_back
    assert other.startswith("Traceback") and "ValueError: a real bug" in other


def test_feedback_goes_out_once_every_answer_is_graded(gradebook):
    nb = new_notebook(cells=[new_markdown_cell("answer")])
    assert RequireHandGrading().preprocess(nb, resources(gradebook))[0] is nb


def test_status_tells_a_submission_autograde_never_reached_from_one_waiting_for_a_person(gradebook, capsys):
    """`course status`: a test cell without a score means autograde never got through the submission; a
    code answer graded by hand has none either until a person gives it one, and is waiting, not that."""
    from course.gradebook import print_hand_grading
    from autograder.messages import text

    with Gradebook(gradebook) as book:
        book.add_grade_cell("explain_code", "nb", "a1", max_score=1, cell_type="code")
        book.add_solution_cell("explain_code", "nb", "a1")
        book.add_source_cell("explain_code", "nb", "a1", cell_type="code", locked=False, source="")
        for student, test_score in [("cy", 2.0), ("bo", None)]:  # bo's file was not a notebook
            book.add_student(student)
            book.add_submission("a1", student)
            book.find_grade("test_move", "nb", "a1", student).auto_score = test_score
            book.find_grade("explain_code", "nb", "a1", student).needs_manual_grade = True
        book.db.commit()
    print_hand_grading(gradebook, "a1", every_student=True)
    shown = capsys.readouterr().out
    assert text("status_not_autograded", student="bo", assignment="a1").en in shown, shown
    assert text("status_not_autograded", student="cy", assignment="a1").en not in shown, shown
    assert shows(shown, "status_waiting") and "cy: " in shown and "explain_code" in shown, shown


def test_the_course_configuration_runs_nbgraders_pipelines_with_the_courses_steps_only():
    """nbgrader_config.py: nbgrader's own sanitize and autograde steps, in nbgrader's order, with the course's
    steps at their places (DecideGrades just before SaveAutoGrades reads the points)."""
    from nbgrader.converters import Autograde

    from course import classroom, settings

    configured = settings.load(classroom.ROOT).Autograde
    replaced = {"course.plugins.autograde.OverwriteCellsQuietly": "OverwriteCells",
                "course.plugins.autograde.SafeExecute": "Execute"}
    added = {"course.plugins.autograde.DropMalformedMetadata", "course.plugins.autograde.ForgetUnknownCells",
             "course.plugins.autograde.ViewedAsReleased", "course.plugins.autograde.DecideGrades",
             "course.plugins.autograde.ForgetStaleFeedback", "course.plugins.autograde.RememberAttempts",
             "course.plugins.autograde.OnlyTheAssignmentsFiles", "course.plugins.autograde.RestoreInstructorsCells"}
    for trait, steps in [("sanitize_preprocessors", ["ForgetStaleFeedback", "OnlyTheAssignmentsFiles", "DropMalformedMetadata", "DeduplicateIds",
                                                     "ForgetUnknownCells", "ViewedAsReleased", "OverwriteCellsQuietly",
                                                     "RestoreInstructorsCells"]),
                         ("autograde_preprocessors", ["SafeExecute", "DecideGrades", "SaveAutoGrades",
                                                      "RememberAttempts"])]:
        pipeline = configured[trait]
        names = [step if isinstance(step, str) else step.__name__ for step in pipeline]
        nbgraders = [step.__name__ for step in Autograde.class_traits()[trait].default()]
        assert [replaced.get(n, n) for n in names if n not in added] == nbgraders, names
        shown = [n.rpartition(".")[2] for n in names]
        assert [n for n in shown if n in steps] == steps, shown


OVER_THE_PAGE = "position:fixed;top:0;left:0;width:100vw;height:100vh"


def test_an_outputs_metadata_keeps_only_numbers_for_sizes_a_flag_and_a_text():
    from course.plugins.pages import SanitizeSubmission

    image = new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "x"}, metadata={
        "image/png": {"width": f"1 style={OVER_THE_PAGE}", "height": 40, "unconfined": "yes", "alt": "a plot"},
        "width": "50", "height": float("nan"), "filenames": {"image/png": "http://evil.invalid/x.png"},
        "text/html": {"isolated": True}})
    notebook = new_notebook(cells=[new_code_cell("plot()", outputs=[image])])
    SanitizeSubmission().preprocess(notebook, {})
    assert notebook.cells[0].outputs[0].metadata == {
        "image/png": {"height": 40, "alt": "a plot"}, "width": "50", "text/html": {}}


@pytest.mark.parametrize("raw_mimetype", [None, "text/html", "text/markdown"])
def test_a_raw_cell_is_shown_as_its_text_with_no_link_made(raw_mimetype):
    """The templates write a raw cell into the page outside every cell, where the mark of a student's link does not
    reach: a "sign in again" link showed unmarked under the feedback's score table (the twenty-second session)."""
    from course.plugins.pages import SanitizeSubmission, markdown2html

    raw = nbformat.v4.new_raw_cell('<a href="http://evil.invalid/login">Sign in again</a>\n<b>bold</b>')
    if raw_mimetype:
        raw.metadata["raw_mimetype"] = raw_mimetype
    notebook = new_notebook(cells=[raw])
    SanitizeSubmission().preprocess(notebook, {})
    cell = notebook.cells[0]
    assert cell.cell_type == "markdown" and "raw_mimetype" not in cell.metadata
    html = markdown2html({"cell": cell, "resources": {}}, cell.source)
    assert "&lt;a href=&#34;http://evil.invalid/login&#34;&gt;Sign in again&lt;/a&gt;" in html.replace("&quot;", "&#34;")
    assert "<a " not in html and "<b>" not in html and "原始单元格" in html


def test_html_with_more_tags_than_a_page_parses_is_shown_as_text_and_quickly():
    """html5lib, under the sanitisers, takes time quadratic in how deeply elements nest: a 270 KB markdown cell held
    generate_feedback for 151 s and the formgrader's server for 134 s (the twenty-second session's attacker)."""
    from course.plugins.pages import MOST_TAGS, SanitizeSubmission, markdown2html

    nested = "Notes\n\n" + "<b><i>" * 40_000 + "x"
    output = new_output("display_data", data={"text/html": nested, "text/markdown": nested, "text/plain": "x"})
    few = "<b>fine</b> " * (MOST_TAGS // 2)
    notebook = new_notebook(cells=[new_markdown_cell(nested), new_code_cell("show()", outputs=[output]),
                                   new_markdown_cell(few)])
    started = time.monotonic()
    SanitizeSubmission().preprocess(notebook, {})
    shown = markdown2html({"cell": notebook.cells[0], "resources": {}}, notebook.cells[0].source)
    assert time.monotonic() - started < 60  # about 2 s here; parsed as HTML, 150 s
    assert "&lt;b&gt;&lt;i&gt;" in shown and "<b>" not in shown and "HTML 标签" in shown
    assert notebook.cells[1].outputs[0].data == {"text/plain": nested}
    assert notebook.cells[2].source.count("<b>fine</b>") == MOST_TAGS // 2  # at most MOST_TAGS: parsed as HTML


def test_a_page_parses_at_most_so_many_tags_in_all_its_pieces():
    from course.plugins.pages import MOST_TAGS, MOST_TAGS_PER_PAGE, SanitizeSubmission

    piece = "<b><i>" * (MOST_TAGS // 2 - 1) + "x"  # one tag short of a piece's bound, 2 a pair
    cells = [new_markdown_cell(piece) for _ in range(2 * MOST_TAGS_PER_PAGE // MOST_TAGS)]
    SanitizeSubmission().preprocess(new_notebook(cells=cells), {})
    parsed = [cell for cell in cells if not cell.source.startswith("*(")]
    assert len(parsed) == MOST_TAGS_PER_PAGE // (MOST_TAGS - 2)


@pytest.mark.parametrize("markdown, kept, dropped", [
    ("![plot](http://evil.invalid/p.png)", '<img alt="plot"', "evil.invalid"),
    ("[log in](http://evil.invalid/login)", '<a href="http://evil.invalid/login">log in</a>', None),
    ("[run](javascript:alert(1)) [page](data:text/html,x)", "<a>run</a> <a>page</a>", "alert"),
    (f'<div style="{OVER_THE_PAGE}" class="navbar-fixed-top">100 / 100</div>', "<div>100 / 100</div>", "fixed"),
    ("<style>@import url(http://evil.invalid/x.css)</style>", "&lt;style&gt;", "<style>"),
    ("<base href='http://evil.invalid/'><meta http-equiv='refresh' content='0'>", "&lt;base", "<meta"),
    ("<form action='http://evil.invalid/'><input type='password'></form>", "&lt;form", "<input"),
    ("| a | b |\n|:-|-:|\n| 1 | 2 |", '<td style="text-align:right;">2</td>', None),
    ("```python\nimport torch\n```", '<span class="kn">import</span>', None),
    ("# Notes", '<h1 id="user-content-Notes">Notes<a class="anchor-link" href="#user-content-Notes">', None),
    # a heading named as a test cell's grade id: the formgrader bound every test's grade to the first element of that
    # id, inside the written answer, whose "Full credit" then gave an unanswered notebook full marks
    ("###### test_pick_device\n\n[up](#test_pick_device)", '<a href="#user-content-test_pick_device">up</a>',
     'id="test_pick_device"'),
])
def test_what_markdown_makes_of_a_submission_keeps_no_way_over_or_off_the_page(markdown, kept, dropped):
    from course.plugins.pages import markdown2html

    html = markdown2html({"cell": {}, "resources": {}}, markdown)
    assert kept in html, html
    assert dropped is None or dropped not in html, html


def test_grading_a_submission_again_removes_its_old_feedback_only(tmp_path):
    """generate_feedback skips feedback as new as the submission's timestamp, which a regrade keeps: the old
    page would go out with `release_feedback` (issue 43). Grading removes it; other students' stay."""
    from traitlets.config import Config

    from course.plugins.autograde import ForgetStaleFeedback

    for student in ("ann", "bob"):
        (tmp_path / "feedback" / student / "a1").mkdir(parents=True)
        (tmp_path / "feedback" / student / "a1" / "a1.html").write_text("old points")
    config = Config()
    config.CourseDirectory.root = str(tmp_path)
    resources = {"nbgrader": {"student": "ann", "assignment": "a1", "notebook": "a1"}}
    ForgetStaleFeedback(config=config).preprocess(new_notebook(), resources)
    assert not (tmp_path / "feedback" / "ann" / "a1").exists()
    assert (tmp_path / "feedback" / "bob" / "a1" / "a1.html").read_text() == "old points"
    ForgetStaleFeedback(config=config).preprocess(new_notebook(), resources)  # nothing there: nothing to do


def test_status_names_the_submissions_late_by_the_gradebooks_due_date(gradebook, capsys):
    """`nbgrader collect --update` brings a late resubmission in; `course grade` and `course status` say who
    is late by the due date nbgrader's gradebook holds (issue 43)."""
    from datetime import datetime

    from course.gradebook import print_late

    print_late(gradebook, "a1")  # no due date: nobody is late
    assert capsys.readouterr().out == ""
    with Gradebook(gradebook) as book:
        book.update_or_create_assignment("a1", duedate=datetime(2026, 3, 1, 12, 0))
        book.add_student("bo")
        book.add_submission("a1", "bo", timestamp=datetime(2026, 3, 1, 13, 30, 5))
        book.find_submission("a1", "ada").timestamp = datetime(2026, 3, 1, 11, 0)
        book.db.commit()
    print_late(gradebook, "a1")
    shown = capsys.readouterr().out
    assert shows(shown, "status_late") and "bo: " in shown and "91 min" in shown and "2026-03-01 12:00" in shown, shown
    assert "ada" not in shown, shown


def test_every_graded_submission_leaves_its_diagnoses_by_submission_time(gradebook, tmp_path):
    """`course insights` shows a student's first attempt after a resubmission replaced it in autograded/
    (issue 43): the grader keeps each submission's diagnoses in attempts/, a regrade replacing its own entry."""
    import json
    from datetime import datetime

    from traitlets.config import Config

    from course.plugins.autograde import DIAGNOSIS, RememberAttempts, attempts_file

    config = Config()
    config.CourseDirectory.root = str(tmp_path)

    def graded(diagnosis, when):
        with Gradebook(gradebook) as book:
            book.find_submission("a1", "ada").timestamp = when
            book.db.commit()
        cell = graded_cell("assert True", "test_move")
        cell.metadata[DIAGNOSIS] = diagnosis
        RememberAttempts(config=config).preprocess(new_notebook(cells=[cell, new_markdown_cell("x")]), resources(gradebook))

    graded({"key": "forgot_assignment"}, datetime(2026, 3, 1, 10, 0))
    graded({"key": "wrong_device"}, datetime(2026, 3, 1, 10, 0))  # the same submission regraded: replaced
    graded({}, datetime(2026, 3, 2, 9, 0))                         # a resubmission: kept beside it
    kept = json.loads(open(attempts_file(tmp_path, "a1", "ada"), encoding="utf-8").read())
    assert kept == {"2026-03-01 10:00:00": {"nb": {"test_move": {"key": "wrong_device"}}},
                    "2026-03-02 09:00:00": {"nb": {"test_move": {}}}}


def test_feedback_is_in_the_chinese_form_the_roster_names_for_the_student(tmp_path):
    """A 繁體 student's feedback (issue 43): her roster row says chinese=zh-hant; the instructor's prose, the test
    cells and the grader's messages are converted, her own answers are left as she wrote them."""
    from traitlets.config import Config

    from autograder.messages import catalogue, text
    from course.plugins.feedback import StudentsChinese

    (tmp_path / "roster.csv").write_text("id,first_name,last_name,email,chinese\nmei,Mei,Lin,,zh-hant\nli,Li,Wang,,\n",
                                         encoding="utf-8")
    config = Config()
    config.CourseDirectory.root = str(tmp_path)
    diagnostic = text("verdict_missing")

    def page(student):
        prose = new_markdown_cell("请把结果赋值给变量。")
        answer = graded_cell("x = 1  # 我的答案：设备", "answer", solution=True)
        test = graded_cell("# 隐藏测试已在此运行", "test_move")
        test.outputs = [new_output("error", ename="AssertionError", evalue=str(diagnostic), traceback=[str(diagnostic)])]
        nb, _ = StudentsChinese(config=config).preprocess(new_notebook(cells=[prose, answer, test]), resources(student=student))
        return nb.cells

    prose, answer, test = page("mei")
    assert test.outputs[0].evalue == f"{diagnostic.en}\n{catalogue()['verdict_missing']['zh-hant']}"
    assert test.outputs[0].traceback == [test.outputs[0].evalue]
    assert prose.source == "請把結果賦值給變數。" and test.source == "# 隱藏測試已在此執行"
    assert answer.source == "x = 1  # 我的答案：设备"  # as submitted
    assert [cell.source for cell in page("li")] == ["请把结果赋值给变量。", "x = 1  # 我的答案：设备", "# 隐藏测试已在此运行"]
    assert [cell.source for cell in page("someone-not-on-the-roster")][0] == "请把结果赋值给变量。"


def test_only_the_assignments_own_files_stay_where_the_kernel_works(gradebook, tmp_path, caplog):
    """Before any kernel starts, the grading folder keeps the source folder's files, the assignment's notebooks
    and nbgrader's timestamp; whatever else the submission brought is removed and named, in both languages."""
    import logging

    from traitlets.config import Config

    from support.messages import shows
    from course.plugins.autograde import OnlyTheAssignmentsFiles

    (tmp_path / "source" / "a1" / "data").mkdir(parents=True)
    (tmp_path / "source" / "a1" / "data" / "points.csv").write_text("1,2")
    working = tmp_path / "autograded" / "ada" / "a1"
    for name in ["nb.ipynb", "other.ipynb", "timestamp.txt", "submission_secret.txt", "data/points.csv", "torch.py",
                 "data/extra.csv", "autograder/__init__.py"]:
        (working / name).parent.mkdir(parents=True, exist_ok=True)
        (working / name).write_text("x")
    (working / "link").symlink_to(tmp_path / "source")
    config = Config()
    config.CourseDirectory.root = str(tmp_path)
    resources = {"nbgrader": {"student": "ada", "assignment": "a1", "notebook": "nb", "db_url": gradebook}}
    with caplog.at_level(logging.WARNING):
        OnlyTheAssignmentsFiles(config=config, log=logging.getLogger("test")).preprocess(new_notebook(), resources)
    kept = sorted(str(path.relative_to(working)) for path in working.rglob("*"))
    assert kept == ["data", "data/points.csv", "nb.ipynb", "submission_secret.txt", "timestamp.txt"]
    assert shows(caplog.text, "submission_extra_files")
    for name in ["other.ipynb", "torch.py", "data/extra.csv", "autograder/__init__.py", "link"]:
        assert name in caplog.text
    assert (tmp_path / "source" / "a1" / "data" / "points.csv").exists()  # the link was removed, not followed


def test_a_markdown_cell_that_quotes_the_delimiters_keeps_them():
    """Only test cells hold hidden tests: prose about them is prose."""
    prose = new_markdown_cell("### BEGIN HIDDEN TESTS\nhow a hidden test is written", metadata={"nbgrader": {
        "grade": False, "solution": False, "locked": True, "grade_id": "notes", "schema_version": 3}})
    nb, _ = HideHiddenTests().preprocess(new_notebook(cells=[prose]), {})
    assert nb.cells[0].source == "### BEGIN HIDDEN TESTS\nhow a hidden test is written"


@pytest.mark.parametrize("tag, name, value, allowed", [
    ("a", "href", "https://example.org", True), ("a", "title", "x", True), ("a", "style", "x", False),
    ("img", "src", "data:image/png;base64,iVBORw0KGgo=", True), ("img", "src", "https://example.org/x.png", False),
    ("img", "src", "100", False), ("img", "alt", "x", True), ("img", "title", "x", True),
    ("img", "width", "100", True), ("img", "height", "12.5", True), ("img", "width", "100px", False),
    ("th", "align", "left", True), ("td", "align", "center", True), ("td", "style", "text-align: left", True),
    ("td", "onclick", "x", False), ("p", "id", "x", False), ("p", "align", "left", False),
    *[(f"h{level}", "id", "x", True) for level in range(1, 7)],
])
def test_markdown_keeps_only_the_attributes_the_pages_allow(tag, name, value, allowed):
    from course.plugins.pages import _markdown_attribute

    assert _markdown_attribute(tag, name, value) is allowed


@pytest.mark.parametrize("size, kept", [(0, True), (0.5, True), (99_999, True), (100_000, False), (-1, False),
                                        (True, False), ("120", True), ("12px", False)])
def test_an_image_size_is_kept_only_as_a_plain_number(size, kept):
    from course.plugins.pages import checked_metadata

    assert checked_metadata({"width": size}) == ({"width": size} if kept else {})


def nested(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value


# what a student's kernel can send that nbclient cannot make a notebook output of (a hostile student's, the twenty-first
# session: each stopped the whole notebook, with no grade); the kernel and its messages are the student's
UNREADABLE_MESSAGES = {
    "a display whose text is a number": ("display_data", {"data": {"text/plain": 123}, "metadata": {}}),
    "an error whose name is a dict": ("error", {"ename": {"a": 1}, "evalue": 5, "traceback": 7}),
    "a display nested 900 deep": ("display_data", {"data": {"application/json": {"a": nested(900)}, "text/plain": "deep"},
                                                   "metadata": {}}),
    "an error nested 5000 deep": ("error", {"ename": "E", "evalue": nested(5000), "traceback": []}),
    "content that is no dict": ("stream", ["stdout", "text"]),
}


def sent(kind, content):
    """A message as the kernel sends it, for the cell being run."""
    return {"msg_type": kind, "header": {"msg_type": kind}, "parent_header": {"msg_id": "m"}, "content": content}


@pytest.fixture
def executing():
    """SafeExecute as it is while the one cell of its notebook runs (nbclient's trackers as its run sets them)."""
    execute = SafeExecute(max_outputs=5, max_output_chars=1000, max_notebook_chars=10_000)
    execute.nb = new_notebook(cells=[new_code_cell("print('fine')")])
    execute.reset_execution_trackers()
    execute._running, execute._chars, execute._dropped, execute.clear_before_next_output = 0, 0, {}, False
    return execute


@pytest.mark.parametrize("kind, content", UNREADABLE_MESSAGES.values(), ids=list(UNREADABLE_MESSAGES))
def test_a_kernel_message_nbclient_cannot_read_becomes_a_note_and_the_notebook_goes_on(executing, kind, content):
    execute, cell = executing, executing.nb.cells[0]
    execute.process_message(sent(kind, content), cell, 0)
    execute.process_message(sent("stream", {"name": "stdout", "text": "fine\n"}), cell, 0)
    validate(new_notebook(cells=[cell]))  # nbgrader writes it, and its pages show it
    assert [output.get("name") for output in cell.outputs][-1] == "stdout"
    noted = [output.text for output in cell.outputs if output.get("name") == "stderr"]
    if kind == "display_data" and "deep" in str(content.get("data", {}).get("text/plain")):
        # too deep to count: larger than any limit, so dropped, as a flood of displays is, with the same note
        assert not noted and execute._dropped == {0: 1}
    else:
        assert len(noted) == 1 and shows(noted[0], "output_unreadable") and not execute._dropped


def test_a_display_updated_in_place_is_bounded_as_any_output(executing):
    """nbclient writes an update into the display's earlier output itself: three updates of 30 M characters made a 90 MB
    graded notebook (a hostile student's, the twenty-first session)."""
    execute, cell = executing, executing.nb.cells[0]
    shown = {"data": {"text/plain": "small"}, "metadata": {}, "transient": {"display_id": "d"}}
    execute.process_message(sent("display_data", shown), cell, 0)
    for _ in range(3):
        execute.process_message(sent("update_display_data", {**shown, "data": {"text/plain": "x" * 5000}}), cell, 0)
    [output] = cell.outputs
    assert len(output.data["text/plain"]) < 1000 and shows(output.data["text/plain"], "output_too_large")
    execute.process_message(sent("update_display_data", {**shown, "data": {"text/plain": "fits"}}), cell, 0)
    assert output.data["text/plain"] == "fits"


@pytest.mark.parametrize("shown", [
    {"data": {"text/plain": "small"}, "metadata": {"k" * 2000: 0}},
    {"data": {"text/plain": [""] * 1000}, "metadata": {}},
    {"data": {"text/plain": "small", "application/json": {"a": [0] * 500}}, "metadata": {}},
], ids=["a long key", "many empty strings", "many numbers"])
def test_an_output_is_measured_as_the_json_it_takes(executing, shown):
    """Keys and empty strings counted as nothing: a 30 M-character key, or twenty million empty strings, made a
    220 MB graded notebook and a grader of 2.4 GB (a hostile student's, the twenty-first session)."""
    execute, cell = executing, executing.nb.cells[0]
    execute.process_message(sent("display_data", shown), cell, 0)
    [output] = cell.outputs
    assert shows(output.data["text/plain"], "output_too_large") and output.metadata == {}


@pytest.mark.parametrize("count", ["7", -1, 2.5, True, "2" * 100_000])
def test_an_execution_count_that_is_no_count_is_left_out(executing, count):
    """nbclient writes the execution count of any message into the cell, as sent: the notebook was then invalid, and
    nbgrader graded nothing of it."""
    execute, cell = executing, executing.nb.cells[0]
    execute.process_message(sent("execute_input", {"code": "", "execution_count": count}), cell, 0)
    validate(execute.nb)
    assert cell.execution_count is None
    execute.process_message(sent("execute_input", {"code": "", "execution_count": 3}), cell, 0)
    assert cell.execution_count == 3


@pytest.mark.parametrize("kind, content", [
    ("error", {"ename": "E" * 5000, "evalue": "x", "traceback": ["x"]}),
    ("stream", {"name": "n" * 5000, "text": "x"}),
    ("execute_result", {"data": {"text/plain": "x" * 5000}, "metadata": {}, "execution_count": 1, "extra": "e" * 5000}),
], ids=["an error's name", "a stream's name", "a field no output has"])
def test_an_output_cut_keeps_no_field_whole(executing, kind, content):
    """A field the cut kept as sent (an error's name of 30 M characters) was kept whole in the graded notebook."""
    execute, cell = executing, executing.nb.cells[0]
    execute.process_message(sent(kind, content), cell, 0)
    validate(execute.nb)
    assert len(nbformat.writes(execute.nb)) < 3000 + len(nbformat.writes(new_notebook(cells=[new_code_cell("print('fine')")])))


def test_an_update_counts_once_for_each_output_it_is_written_into(executing):
    """Many tiny displays of one id, then one update of 99,000 characters: a 395 MB graded notebook (a hostile
    student's, the twenty-first session)."""
    execute = executing
    execute.max_notebook_chars = 100_000  # room for the fifteen displays, each of four dicts (CONTAINER each)
    execute.nb.cells = [new_code_cell(f"cell {index}") for index in range(3)]
    shown = {"data": {"text/plain": "s"}, "metadata": {}, "transient": {"display_id": "fan"}}
    for index, cell in enumerate(execute.nb.cells):
        for _ in range(5):
            execute.process_message(sent("display_data", shown), cell, index)
    execute.process_message(sent("update_display_data", {**shown, "data": {"text/plain": "U" * 900}}), cell, 2)
    written = [output.data["text/plain"] for cell in execute.nb.cells for output in cell.outputs]
    assert len(written) == 15 and all(shows(text, "output_too_large") for text in written)
    assert sum(map(len, written)) < execute.max_notebook_chars


def test_stderr_past_the_first_counts_as_any_output(executing):
    """The first stderr output decides the cell's own run, and is kept whatever came before it; later ones were kept
    whole too, uncounted (1,200 lines of 99,000 characters: a 50 MB graded notebook)."""
    execute, cell = executing, executing.nb.cells[0]
    for _ in range(6):
        execute.process_message(sent("display_data", {"data": {"text/plain": "spam"}, "metadata": {}}), cell, 0)
    for _ in range(20):
        execute.process_message(sent("stream", {"name": "stderr", "text": "e" * 5000}), cell, 0)
    assert [o.output_type for o in cell.outputs] == ["display_data"] * 5 + ["stream"]
    assert len(cell.outputs[-1].text) == 1000 and execute._dropped == {0: 20}


def test_past_the_notebooks_bound_a_cells_first_error_keeps_its_first_characters(executing):
    """Each cell's first stderr output and first error were kept whole (shortened to an output's bound) however many
    cells had one: 300 cells made a 75 MB graded notebook (a hostile student's, the twenty-first session)."""
    execute = executing
    execute.max_output_chars = 5000
    execute.nb.cells = [new_code_cell(f"cell {index}") for index in range(40)]
    for index, cell in enumerate(execute.nb.cells):
        execute.process_message(sent("stream", {"name": "stderr", "text": "e" * 5000}), cell, index)
    assert all(len(cell.outputs) == 1 for cell in execute.nb.cells)  # each cell's first, as it decides its own run
    kept = sum(len(cell.outputs[0].text) for cell in execute.nb.cells)
    assert kept <= execute.max_notebook_chars + 40 * DECIDING_PAST_THE_BOUND < 40 * execute.max_output_chars


def test_the_error_of_a_cells_reply_is_bounded_as_an_error_output(executing):
    """nbgrader adds a reply's error to the cell where no output names it: the reply is the kernel's, as any message."""
    execute, cell = executing, executing.nb.cells[0]
    reply = {"content": {"status": "error", "ename": "E" * 5000, "evalue": "v" * 50_000, "traceback": ["t" * 5000] * 99}}
    execute.on_cell_executed(cell=cell, cell_index=0, execute_reply=reply)
    validate(execute.nb)
    [error] = cell.outputs
    assert len(error.ename) <= 200 and len(error.evalue) <= execute.max_output_chars and len(error.traceback) <= 40


def test_widget_messages_leave_nothing_in_the_graded_notebook(executing):
    """A grading kernel's widgets have no page: nbclient kept each state the kernel sent in the notebook's metadata (60
    MB from two messages), and stopped the notebook on a state it could not read."""
    execute, cell = executing, executing.nb.cells[0]
    for state in ({"_model_name": "HTMLModel", "_model_module": "@jupyter-widgets/controls", "value": "W" * 50_000},
                  {"value": "no model module"}):
        execute.process_message(sent("comm_open", {"comm_id": "c", "target_name": "jupyter.widget",
                                                   "data": {"state": state}}), cell, 0)
    assert cell.outputs == [] and not execute.widget_state and not execute.output_hook_stack["m"]


@pytest.mark.parametrize("padding, read", [(0, True), (2_000, True), (300_000, False)])
def test_a_submission_is_read_only_within_bounds(tmp_path, padding, read):
    """Reading a notebook is the grading process's time and memory, before any budget: 7.5 million `{}` in one cell's
    metadata held it for 14 minutes and 16 GB (the twenty-second session). The course's own notebooks hold about
    2,000 values."""
    from course.plugins.autograde import BoundedSubmission, NotebookTooLargeError

    notebook = new_notebook(cells=[new_code_cell("x = 1", metadata={"pad": [{}] * padding})])
    path = tmp_path / "submitted.ipynb"
    nbformat.write(notebook, path)
    if read:
        output, _ = BoundedSubmission().from_filename(str(path))
        assert "x = 1" in output
    else:
        with pytest.raises(NotebookTooLargeError) as refused:
            BoundedSubmission().from_filename(str(path))
        assert shows(str(refused.value), "notebook_too_large")


def test_an_output_of_many_small_dicts_counts_as_their_memory_not_their_characters(executing):
    """JSON writes `{}` in 2 characters, and the grader holds a dict of about a hundred bytes: 60 outputs of 49,000
    of them, each under the bound as characters, made a grader of 3.1 GB and a feedback page of 100 s and 5.2 GB (a
    hostile student's, the twenty-second session)."""
    execute, cell = executing, executing.nb.cells[0]
    execute.process_message(sent("display_data", {"data": {"application/json": {"k": [{}] * 40}}, "metadata": {}}),
                            cell, 0)
    assert shows(cell.outputs[0].data["text/plain"], "output_too_large")

