"""The gradebook queries of the `course` commands: whether an assignment is registered, who submitted
without being on the roster, who submitted late, and what still waits for grading by hand: the one rule
for that (`waiting_for_a_person`), which the feedback and export plugins call too."""
import math

from nbgrader.api import Gradebook, MissingEntry

from autograder.messages import message

from .terminal import visible


def registered(db_url: str, assignment: str) -> bool:
    with Gradebook(db_url) as gradebook:
        try:
            return bool(gradebook.find_assignment(assignment).notebooks)
        except MissingEntry:
            return False


def off_roster(db_url: str, students) -> list[str]:
    """Those of `students` the gradebook does not know (not on the roster that `course setup` imported)."""
    with Gradebook(db_url) as gradebook:
        known = {student.id for student in gradebook.students}
    return [student for student in students if student not in known]


def print_late(db_url: str, assignment: str):
    """The graded submissions nbgrader counts as late: submitted (the timestamp.txt of `nbgrader collect`)
    after the due date the gradebook holds (`nbgrader db assignment add ASSIGNMENT --duedate=...`)."""
    with Gradebook(db_url) as gradebook:
        due = gradebook.find_assignment(assignment).duedate
        if due is None:
            return
        for submission in sorted(gradebook.assignment_submissions(assignment), key=lambda s: s.student_id):
            if submission.total_seconds_late > 0:
                print(message("status_late", student=visible(submission.student_id), assignment=assignment,
                              minutes=math.ceil(submission.total_seconds_late / 60),
                              submitted=f"{submission.timestamp:%Y-%m-%d %H:%M}", due=f"{due:%Y-%m-%d %H:%M}"))


def print_hand_grading(db_url: str, assignment: str, every_student=False):
    """What nbgrader's gradebook says still needs a person (`needs_manual_grade`), per student."""
    with Gradebook(db_url) as gradebook:
        submissions = sorted(gradebook.assignment_submissions(assignment), key=lambda s: s.student_id)
        waiting = 0
        for submission in submissions:
            student = visible(submission.student_id)  # a folder's name: no control character reaches the terminal
            fields = dict(student=student, score=submission.score, max_score=submission.max_score)
            if not autograded(submission):
                print(message("status_not_autograded", student=student, assignment=assignment))
                continue
            cells = waiting_for_a_person(submission)
            waiting += bool(cells)
            if cells:
                print(message("status_waiting", cells=", ".join(cells), **fields))
            elif every_student:
                print(message("status_done", **fields))
        if waiting:
            print(message("status_summary", assignment=assignment, waiting=waiting, total=len(submissions)), flush=True)
        else:
            print(message("status_all_graded", assignment=assignment, total=len(submissions)), flush=True)


def waiting_for_a_person(submission) -> list[str]:
    """The grade cells of a submission (nbgrader's SubmittedAssignment) that wait for a person: those
    nbgrader flags `needs_manual_grade` (a written answer, a test cell whose points a person must
    confirm). The one rule of `course status`, `course grade`, generate_feedback's RequireHandGrading and
    export's CsvExportWarningUngraded."""
    return [grade.name for notebook in submission.notebooks for grade in notebook.grades if grade.needs_manual_grade]


def autograded(submission) -> bool:
    """Whether autograde got through the submission: a test cell without any score means it did not (a
    file that is not a notebook, say), and then nothing in it waits for a person yet."""
    return not any(is_test_grade(grade) and grade.auto_score is None and grade.manual_score is None
                   for notebook in submission.notebooks for grade in notebook.grades)


def is_test_grade(grade) -> bool:
    """The grade of an autograded test cell: a code cell that is graded but is not an answer (a code answer graded by
    hand is a solution cell too, and has no score until a person gives it one)."""
    cell = grade.cell
    return cell.cell_type == "code" and cell.name not in {s.name for s in cell.notebook.solution_cells}
