"""What the class got wrong: per exercise, how many students hit each diagnostic of the catalogue.

`course insights ASSIGNMENT` reads the graded class: the gradebook's points, and the test cells of the
autograded notebooks, where the grader (`course.plugins.autograde.DecideGrades`, never the submission)
stored the message keys of each failure. It writes a bilingual HTML page with a bar chart per exercise
(inline SVG: it reads offline) and a CSV of the same counts. Counted by message key, so the numbers are
the same in both languages; each diagnostic names the lesson section that teaches the point
(`teaches.json`). The page is Jinja2 templates (templates/insights/), autoescaped: student ids, the only
text on it that does not come from the course, and everything else show as text, never as markup.
"""
import csv
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import jinja2
import nbformat

from autograder.messages import catalogue, text

from . import settings
from .classroom import ROOT, natural_order
from .plugins.autograde import ATTEMPTS, DIAGNOSIS, attempts_file  # noqa: F401  (attempts_file: where they are)

LESSONS = ROOT / "notebooks"
NOT_RECORDED = "insights_not_recorded"  # a test cell autograded before the grader stored its keys


@dataclass
class Exercise:
    """One autograded test cell of the assignment, and why students lost its points."""
    grade_id: str
    points: float
    graded: list = field(default_factory=list)   # students with a grade for this cell
    full: list = field(default_factory=list)     # ... who got all its points
    causes: dict = field(default_factory=lambda: defaultdict(list))  # (key, hint) → students
    lost: dict = field(default_factory=dict)     # student → the points they lost here

    def ranked(self):
        """(key, hint, students), the most frequent first."""
        return sorted(((key, hint, students) for (key, hint), students in self.causes.items()),
                      key=lambda item: (-len(item[2]), item[0], item[1] or ""))


def read_class(root: Path, assignment: str) -> list[Exercise]:
    """Every autograded test cell of `assignment` in the course folder `root`, with its causes."""
    from nbgrader.api import Gradebook
    from nbgrader.coursedir import CourseDirectory

    config = settings.load(root)
    folders = CourseDirectory(config=config)
    exercises = {}
    with Gradebook(settings.gradebook_url(config)) as gradebook:
        for notebook in gradebook.find_assignment(assignment).notebooks:
            for cell in notebook.grade_cells:
                if cell.cell_type == "code":
                    exercises[cell.name] = Exercise(cell.name, cell.max_score)
        for submission in sorted(gradebook.assignment_submissions(assignment), key=lambda s: natural_order(s.student_id)):
            student = submission.student_id
            for notebook in submission.notebooks:
                path = Path(folders.format_path(folders.autograded_directory, student, assignment)) / f"{notebook.name}.ipynb"
                shown = stored_diagnoses(path)
                for grade in notebook.grades:
                    exercise = exercises.get(grade.name)
                    if exercise is None or grade.auto_score is None:
                        continue
                    exercise.graded.append(student)
                    if grade.score >= grade.max_score:
                        exercise.full.append(student)
                    else:
                        exercise.lost[student] = grade.max_score - grade.score
                        found = shown.get(grade.name, {})
                        exercise.causes[(found.get("key", NOT_RECORDED), found.get("hint"))].append(student)
    return list(exercises.values())


@dataclass
class FirstAttempt:
    """A diagnostic of a student's first graded submission, and what their latest one got in that cell."""
    student: str
    grade_id: str
    key: str
    hint: str | None
    now: dict  # the latest attempt's diagnosis of that cell ({}: every point)


def first_attempts(root: Path, assignment: str) -> list[FirstAttempt]:
    """The mistakes of the first graded submission of every student who submitted more than once."""
    found = []
    for path in sorted((Path(root) / ATTEMPTS / assignment).glob("*.json"), key=lambda p: natural_order(p.stem)):
        recorded = json.loads(path.read_text("utf-8"))
        if len(recorded) < 2:
            continue
        times = sorted(recorded)
        first, latest = recorded[times[0]], recorded[times[-1]]
        for notebook, cells in sorted(first.items()):
            for grade_id, diagnosis in cells.items():
                if diagnosis.get("key") in catalogue():
                    hint = diagnosis.get("hint") if diagnosis.get("hint") in catalogue() else None
                    found.append(FirstAttempt(path.stem, grade_id, diagnosis["key"], hint,
                                              latest.get(notebook, {}).get(grade_id, {})))
    return found


def first_attempts_html(found: list[FirstAttempt]) -> str:
    """The first attempts of students who resubmitted, apart from the counts above (which are the latest)."""
    return _macros().first_attempts([_shown_attempt(attempt) for attempt in found])


def _shown_attempt(attempt: FirstAttempt) -> dict:
    en, zh = label(attempt.key, attempt.hint)
    return dict(student=attempt.student, grade_id=attempt.grade_id, key=attempt.key, en=en, zh=zh,
                where=section(attempt.key, attempt.hint), now=attempt.now.get("key") or "")


def stored_diagnoses(path: Path) -> dict[str, dict]:
    """grade id → the message keys the grader stored with that test cell of an autograded notebook."""
    if not path.exists():
        return {}
    found = {}
    for cell in nbformat.read(path, as_version=4).cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        stored = cell.metadata.get(DIAGNOSIS)
        if grade_id and isinstance(stored, dict) and stored.get("key") in catalogue():
            found[grade_id] = {"key": stored["key"], "hint": stored.get("hint") if stored.get("hint") in catalogue() else None}
    return found


@cache
def teaches() -> dict:
    return json.loads((Path(__file__).with_name("teaches.json")).read_text("utf-8"))


def section(key, hint) -> dict | None:
    """Where the lesson teaches the point of a diagnostic: its hint's section, else its own.
    {"lesson", "en", "zh"}: the lesson's file name and the section's heading in each language, both from
    teaches.json, since the lessons are not installed where `course insights` runs on a shared machine."""
    found = teaches().get(hint) or teaches().get(key)
    if found is None:
        return None
    return {"lesson": found["lesson"], "en": found["section"], "zh": found["section_zh"]}


def chinese_heading(lesson: str, heading: str) -> str:
    """The Chinese twin of an English section heading of a lesson in notebooks/ ('' if the lesson is not
    there): what teaches.json's `section_zh` must say (tests/unit/test_insights.py)."""
    path = LESSONS / f"{lesson}.ipynb"
    if not path.exists():
        return ""
    cells = nbformat.read(path, as_version=4).cells
    for index, cell in enumerate(cells[:-1]):
        if cell.cell_type == "markdown" and any(line.lstrip("#").strip() == heading and line.startswith("#")
                                                for line in cell.source.splitlines()):
            twin = next((line for line in cells[index + 1].source.splitlines() if line.startswith("#")), "")
            return twin.lstrip("#").strip()
    return ""


@dataclass
class Misconception:
    """One diagnostic across the whole assignment: the points it cost, who lost them, in which exercises."""
    key: str
    hint: str | None
    points: float = 0.0
    students: set = field(default_factory=set)
    exercises: list = field(default_factory=list)


def costliest(exercises: list[Exercise], count: int = 3) -> list[Misconception]:
    """The `count` misconceptions that cost the class the most points, summed over every exercise where a
    student hit them: what to reteach first. Only diagnostics a lesson section teaches count (not an
    unanswered exercise, a crash or a time-out: those are not a misunderstanding of the course)."""
    found = {}
    for exercise in exercises:
        for key, hint, students in exercise.ranked():
            if section(key, hint) is None:
                continue
            misconception = found.setdefault((key, hint), Misconception(key, hint))
            misconception.points += sum(exercise.lost.get(student, 0.0) for student in students)
            misconception.students.update(students)
            misconception.exercises.append(exercise.grade_id)
    ranked = sorted(found.values(), key=lambda m: (-m.points, -len(m.students), m.key, m.hint or ""))
    return ranked[:count]


def label(key, hint) -> tuple[str, str]:
    """What a diagnostic says, in each language: its hint's text, else its template with the fields
    elided (a student's values are not the point here)."""
    if hint:
        shown = text(hint)
        return shown.en, shown.zh
    entry = catalogue()[key]
    return tuple(_elided(entry[language]) for language in ("en", "zh"))


def _elided(template: str) -> str:
    return re.sub(r"\{[^}]*\}", "…", re.sub(r"^\{what\}[:：]\s*", "", template))


CSV_COLUMNS = ["assignment", "exercise", "points", "graded", "full_points", "message_key", "hint_key", "students",
               "share", "lesson", "section", "student_ids"]


def write_csv(assignment: str, exercises: list[Exercise], path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        for exercise in exercises:
            for key, hint, students in exercise.ranked():
                where = section(key, hint) or {}
                writer.writerow([assignment, exercise.grade_id, exercise.points, len(exercise.graded), len(exercise.full),
                                 key, hint or "", len(students), f"{len(students) / max(len(exercise.graded), 1):.2f}",
                                 where.get("lesson", ""), where.get("en", ""), " ".join(students)])
    return path


BAR_HEIGHT, BAR_GAP, CHART_WIDTH, LABEL_WIDTH = 22, 8, 760, 260
TEMPLATES = Path(__file__).with_name("templates") / "insights"


@cache
def _templates() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined)


def _macros():
    return _templates().get_template("macros.html.j2").module


def bars(exercise: Exercise) -> list[dict]:
    """A horizontal bar per diagnostic: students who hit it, out of those graded."""
    rows = [("full", len(exercise.full))] + [(f"{key} · {hint}" if hint else key, len(students))
                                             for key, hint, students in exercise.ranked()]
    most = max(len(exercise.graded), 1)
    found = []
    for index, (name, count) in enumerate(rows):
        y = BAR_GAP + index * (BAR_HEIGHT + BAR_GAP)
        found.append(dict(label="✓ all points / 满分" if name == "full" else name, count=count,
                          colour="#3a7d44" if name == "full" else "#c0392b", label_x=LABEL_WIDTH - 8,
                          x=LABEL_WIDTH, y=y, text_y=y + 16, height=BAR_HEIGHT,
                          width=(CHART_WIDTH - LABEL_WIDTH - 60) * count / most))
    return found


def chart(exercise: Exercise) -> str:
    shown = bars(exercise)
    return _macros().chart(shown, CHART_WIDTH, len(shown) * (BAR_HEIGHT + BAR_GAP) + BAR_GAP)


def taught_in(where: dict | None) -> str:
    """The lesson section as HTML, in both languages."""
    return _macros().taught_in(where)


def _reteach(exercises: list[Exercise]) -> tuple[list[dict], int]:
    """The costliest misconceptions as the page shows them, and how many students were graded."""
    graded = max((len(exercise.graded) for exercise in exercises), default=0)
    shown = []
    for misconception in costliest(exercises):
        en, zh = label(misconception.key, misconception.hint)
        shown.append(dict(points=misconception.points, students=len(misconception.students), en=en, zh=zh,
                          exercises=misconception.exercises, where=section(misconception.key, misconception.hint)))
    return shown, graded


def class_summary(exercises: list[Exercise]) -> str:
    """The top of the page: the costliest misconceptions, each with the section to reteach."""
    return _macros().summary(*_reteach(exercises))


def _shown_exercise(exercise: Exercise) -> dict:
    rows = []
    for key, hint, students in exercise.ranked():
        en, zh = label(key, hint)
        rows.append(dict(key=key, hint=hint, en=en, zh=zh, where=section(key, hint), students=students))
    shown = bars(exercise)
    return dict(grade_id=exercise.grade_id, points=exercise.points, full=len(exercise.full),
                graded=len(exercise.graded), rows=rows, bars=shown, chart_width=CHART_WIDTH,
                chart_height=len(shown) * (BAR_HEIGHT + BAR_GAP) + BAR_GAP)


def write_html(assignment: str, exercises: list[Exercise], path: Path, first: list[FirstAttempt] = ()) -> Path:
    reteach, graded = _reteach(exercises)
    page = _templates().get_template("page.html.j2").render(
        assignment=assignment, reteach=reteach, graded=graded,
        exercises=[_shown_exercise(exercise) for exercise in exercises],
        first=[_shown_attempt(attempt) for attempt in first])
    path.write_text(page, encoding="utf-8")
    return path


def write(root: Path, assignment: str, out: Path) -> tuple[Path, Path]:
    """The page and the CSV of `assignment`'s graded class, written to the folder `out`."""
    exercises = read_class(Path(root), assignment)
    out.mkdir(parents=True, exist_ok=True)
    return (write_html(assignment, exercises, out / f"{assignment}.html", first_attempts(Path(root), assignment)),
            write_csv(assignment, exercises, out / f"{assignment}.csv"))
