"""Build a class of submissions and read back what nbgrader made of it.

Shared by `course demo` and the grading tests, so the demo shows exactly what the tests check.
"""
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import nbformat

from autograder.messages import message

ROOT = Path(__file__).resolve().parent.parent
SOLUTION_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")
WRITTEN_ANSWER = "Tensor.to returns a new tensor; Module.to changes the module in place.\nTensor.to 返回新张量；Module.to 原地修改模块。"


@dataclass(frozen=True)
class Answer:
    """One student answer to one exercise, kept in the mistake corpus (course/corpus/*.toml)."""
    id: str
    exercise: str
    correct: bool
    code: str
    diagnostic: str = ""  # message key whose text the autograded output must show
    note: str = ""


def corpus(name: str) -> dict:
    """course/corpus/NAME.toml: an assignment's mistake corpus, or the untrusted and forged submissions.
    Package data, so that `course demo` and `course report` need no checkout; a shared environment, which
    every student can read, is installed without them (deploy/exchange/install-shared.sh)."""
    path = resources.files(__package__).joinpath("corpus", f"{name}.toml")
    if not path.is_file():
        raise FileNotFoundError(message("corpus_not_installed", name=name))
    return tomllib.loads(path.read_text("utf-8"))


def load_corpus(assignment: str) -> list[Answer]:
    return [Answer(**entry) for entry in corpus(assignment)["answer"]]


def notebook_path(root: Path, folder: str, assignment: str, student: str | None = None) -> Path:
    parts = [folder] + ([student] if student else []) + [assignment, f"{assignment}.ipynb"]
    return root.joinpath(*parts)


def max_points(assignment: str, root: Path = ROOT) -> dict[str, float]:
    """The points of every autograded test cell of the assignment's source notebook."""
    source = nbformat.read(notebook_path(root, "source", assignment), as_version=4)
    return {grade_id(c): c.metadata.nbgrader["points"] for c in source.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")}


def hand_graded_points(assignment: str, root: Path = ROOT) -> dict[str, float]:
    """The points of every answer of the assignment that a person grades (its written answers)."""
    source = nbformat.read(notebook_path(root, "source", assignment), as_version=4)
    return {grade_id(c): c.metadata.nbgrader["points"] for c in source.cells
            if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("grade")}


def solution_code(cell) -> str:
    """The instructor's solution cell as a student would have typed it: markers removed."""
    return "\n".join(line for line in cell.source.splitlines() if not SOLUTION_MARKER.match(line))


def natural_order(name: str) -> list:
    """mistakes-2 before mistakes-10: the numbers in a name compare as numbers."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name)]


def grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def solved_notebook(course_root: Path, assignment: str, answers=()):
    """The release notebook filled in with the solution, except the exercises `answers` replace."""
    source = nbformat.read(notebook_path(course_root, "source", assignment), as_version=4)
    solutions = {grade_id(c): solution_code(c) for c in source.cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    replacements = {answer.exercise: answer.code.strip("\n") for answer in answers}
    notebook = nbformat.read(notebook_path(course_root, "release", assignment), as_version=4)
    for cell in notebook.cells:
        key = grade_id(cell)
        if key in solutions:
            cell.source = replacements.get(key, WRITTEN_ANSWER if cell.cell_type == "markdown" else solutions[key])
    return notebook


def prepare_course(course_root: Path, assignment: str):
    """A fresh course folder with the repository's config and source, and the release generated."""
    if course_root.exists():
        shutil.rmtree(course_root)
    (course_root / "source").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", course_root)
    shutil.copytree(ROOT / "source" / assignment, course_root / "source" / assignment)
    nbgrader(course_root, "generate_assignment", assignment, "--force")


def submit(course_root: Path, assignment: str, student: str, notebook=None, raw: bytes | None = None):
    """Place a submission as `nbgrader collect` would: a notebook, or raw bytes for a broken file."""
    path = notebook_path(course_root, "submitted", assignment, student)
    path.parent.mkdir(parents=True, exist_ok=True)
    if raw is not None:
        path.write_bytes(raw)
    else:
        nbformat.write(notebook, path)


def nbgrader(course_root: Path, *args, check=True, stream=None):
    """Run the real `nbgrader` command line of this environment in `course_root`."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [str(bin_dir / "nbgrader"), *args]
    process = subprocess.Popen(command, cwd=course_root, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines = []
    for line in process.stdout:
        lines.append(line)
        if stream:
            stream(line)
    process.wait()
    log = "".join(lines)
    if check and process.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed ({process.returncode}):\n{log}")
    return process.returncode, log


def scores(course_root: Path, assignment: str) -> dict[str, dict[str, float]]:
    """Autograded points per student and test cell, read from the gradebook.

    A submission that nbgrader could not execute (not a notebook, say) has no scores and is left out.
    """
    from nbgrader.api import Gradebook

    from . import settings

    result = {}
    with Gradebook(settings.gradebook_url(settings.load(course_root))) as gradebook:  # the course's, as nbgrader's
        for submission in gradebook.assignment_submissions(assignment):
            for notebook in submission.notebooks:
                grades = {g.name: g.auto_score for g in notebook.grades if g.cell.cell_type == "code"}
                if None not in grades.values():
                    result[submission.student_id] = grades
    return result


def diagnostics(course_root: Path, assignment: str, student: str) -> dict[str, str]:
    """The error each failed test cell showed the student, per test cell."""
    path = notebook_path(course_root, "autograded", assignment, student)
    notebook = nbformat.read(path, as_version=4)
    shown = {}
    for cell in notebook.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade"):
            errors = [o for o in cell.outputs if o.output_type == "error"]
            if errors:  # the grader's verdict, then what the notebook's own run raised there, if anything
                shown[grade_id(cell)] = "\n".join(f"{error.ename}: {error.evalue}" for error in errors)
    return shown


def students_from_corpus(answers: list[Answer]) -> dict[str, list[Answer]]:
    """A class in which every corpus answer appears once.

    Student `mistakes-k` makes the k-th recorded mistake of every exercise (so each test cell is
    failed by exactly one cause), `styles-k` writes the k-th correct alternative, `solution` the
    instructor's solution.
    """
    def columns(correct):
        by_exercise = {}
        for answer in answers:
            if answer.correct == correct:
                by_exercise.setdefault(answer.exercise, []).append(answer)
        depth = max((len(v) for v in by_exercise.values()), default=0)
        return [[v[k] for v in by_exercise.values() if k < len(v)] for k in range(depth)]

    students = {"solution": []}
    students |= {f"mistakes-{k + 1}": column for k, column in enumerate(columns(False))}
    students |= {f"styles-{k + 1}": column for k, column in enumerate(columns(True))}
    return students


UNTOUCHED = "untouched"   # submitted the release notebook as it is
BROKEN = "broken-json"    # a file that is not a notebook at all


@dataclass
class GradedClass:
    """What grading the demo class left: scores per student, and who could not be graded."""
    root: Path
    assignment: str
    students: dict          # student → corpus answers they wrote
    scores: dict            # student → {test cell: points}
    not_graded: list

    def diagnostics(self, student):
        return diagnostics(self.root, self.assignment, student)


def grade_demo_class(root: Path, assignment: str, progress=print, reuse=False) -> GradedClass:
    """Build the class of `students_from_corpus` (plus an untouched and a broken submission) in `root`
    and grade it with the real `nbgrader autograde`, `generate_feedback` and `export`.

    With `reuse`, a class already graded in `root` is read back instead.
    """
    students = students_from_corpus(load_corpus(assignment))
    everyone = [*students, UNTOUCHED, BROKEN]
    if not (reuse and (root / "gradebook.db").exists()):
        prepare_course(root, assignment)
        for student, answers in students.items():
            submit(root, assignment, student, solved_notebook(root, assignment, answers))
        submit(root, assignment, UNTOUCHED, raw=notebook_path(root, "release", assignment).read_bytes())
        submit(root, assignment, BROKEN, raw=b'{"cells": [ this is not JSON')
        seen = []

        def report_progress(line):
            # nbgrader logs "Sanitizing <root>/submitted/<student>/..." once per submission
            if "Sanitizing" in line and "/submitted/" in line:
                seen.append(line)
                progress(f"  [{len(seen)}/{len(everyone)}] {line.split('/submitted/')[1].split('/')[0]}")

        _, log = nbgrader(root, "autograde", assignment, check=False, stream=report_progress)
        (root / "autograde.log").write_text(log, "utf-8")
        # nobody grades the demo's written answers by hand: feedback shows them as 0 (RequireHandGrading)
        nbgrader(root, "generate_feedback", assignment, "--RequireHandGrading.allow_ungraded=True")
        nbgrader(root, "export")
    graded = scores(root, assignment)
    return GradedClass(root, assignment, students, graded, [s for s in everyone if s not in graded])
