"""What the class got wrong: per exercise, how many students hit each diagnostic of the catalogue.

`course insights ASSIGNMENT` reads the graded class: the gradebook's points, and the test cells of the
autograded notebooks, where the grader (`grading.DecideGrades`, never the submission) stored the
message keys of each failure. It writes a bilingual HTML page with a bar chart per exercise (inline
SVG: it reads offline) and a CSV of the same counts. Counted by message key, so the numbers are the
same in both languages; each diagnostic names the lesson section that teaches the point
(`teaches.json`). Student ids are the only text on the page that does not come from the course, and
they are escaped.
"""
import csv
import html
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

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
    if not found:
        return ""
    rows = []
    for attempt in found:
        en, zh = label(attempt.key, attempt.hint)
        now = ("✓ all points / 满分" if not attempt.now.get("key")
               else f'<code>{html.escape(attempt.now["key"])}</code>')
        rows.append(f"<tr><td>{html.escape(attempt.student)}</td><td><code>{html.escape(attempt.grade_id)}</code></td>"
                    f"<td><code>{html.escape(attempt.key)}</code><br>{html.escape(en)}<br>"
                    f'<span class="zh">{html.escape(zh)}</span></td><td>{taught_in(section(attempt.key, attempt.hint))}</td>'
                    f"<td>{now}</td></tr>")
    return ('<section id="first-attempts"><h2>First attempts of students who resubmitted / 重新提交的学生第一次提交时的错误</h2>'
            "<p>The counts above are each student's latest graded submission; here is what their first one got "
            'wrong. <span class="zh">上面的统计是每个学生最近一次评分的提交；这里是他们第一次提交时的错误。</span></p>'
            "<table><tr><th>student / 学生</th><th>exercise / 练习</th><th>first attempt / 第一次提交</th>"
            "<th>taught in / 讲解位置</th><th>latest / 最近一次</th></tr>" + "".join(rows) + "</table></section>")


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


def chart(exercise: Exercise) -> str:
    """A horizontal bar per diagnostic: students who hit it, out of those graded."""
    rows = [("full", len(exercise.full))] + [(f"{key} · {hint}" if hint else key, len(students))
                                             for key, hint, students in exercise.ranked()]
    most = max(len(exercise.graded), 1)
    height = len(rows) * (BAR_HEIGHT + BAR_GAP) + BAR_GAP
    bars = []
    for index, (name, count) in enumerate(rows):
        y = BAR_GAP + index * (BAR_HEIGHT + BAR_GAP)
        width = (CHART_WIDTH - LABEL_WIDTH - 60) * count / most
        colour = "#3a7d44" if name == "full" else "#c0392b"
        shown = "✓ all points / 满分" if name == "full" else name
        bars.append(f'<text x="{LABEL_WIDTH - 8}" y="{y + 16}" text-anchor="end">{html.escape(shown)}</text>'
                    f'<rect x="{LABEL_WIDTH}" y="{y}" width="{width:.1f}" height="{BAR_HEIGHT}" fill="{colour}">'
                    f'<title>{count}</title></rect>'
                    f'<text x="{LABEL_WIDTH + width + 6:.1f}" y="{y + 16}">{count}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{CHART_WIDTH}" height="{height}" '
            f'viewBox="0 0 {CHART_WIDTH} {height}" font-family="sans-serif" font-size="13">{"".join(bars)}</svg>')


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 2em auto; max-width: 64em; color: #222; }}
table {{ border-collapse: collapse; margin: .5em 0 2em; width: 100%; }}
td, th {{ border-bottom: 1px solid #ddd; padding: .3em .5em; text-align: left; vertical-align: top; }}
td.count {{ text-align: right; font-weight: bold; }}
.zh {{ color: #555; }}
code {{ font-size: 90%; }}
details {{ font-size: 90%; color: #555; }}
</style></head><body>
<h1>{title}</h1>
<p>{intro_en}<br><span class="zh">{intro_zh}</span></p>
{summary}
{sections}
</body></html>
"""


def taught_in(where: dict | None) -> str:
    """The lesson section as HTML, in both languages."""
    if where is None:
        return "—"
    number = int(where["lesson"].split("_")[0])
    return (f'Lesson {number} § {html.escape(where["en"])}'
            + (f'<br><span class="zh">第 {number} 课 § {html.escape(where["zh"])}</span>' if where["zh"] else ""))


def class_summary(exercises: list[Exercise]) -> str:
    """The top of the page: the costliest misconceptions, each with the section to reteach."""
    graded = max((len(exercise.graded) for exercise in exercises), default=0)
    items = []
    for misconception in costliest(exercises):
        en, zh = label(misconception.key, misconception.hint)
        items.append(f'<li><b>{misconception.points:g} points</b> · {len(misconception.students)} of {graded} students · '
                     f'<code>{html.escape(", ".join(misconception.exercises))}</code><br>{html.escape(en)}'
                     f'<br><span class="zh">{html.escape(zh)}</span><br>'
                     f'{taught_in(section(misconception.key, misconception.hint))}</li>')
    if not items:
        return ('<section id="summary"><h2>Reteach first / 优先重讲</h2><p>No misconception of the course cost this '
                'class any points. · <span class="zh">没有任何课程中的误解让这个班级失分。</span></p></section>')
    return ('<section id="summary"><h2>Reteach first / 优先重讲</h2>'
            f'<p>The misconceptions that cost the class the most points, over all exercises ({graded} students graded). '
            f'<span class="zh">让全班失分最多的误解，统计所有练习（共 {graded} 名学生已评分）。</span></p>'
            f'<ol>{"".join(items)}</ol></section>')


def write_html(assignment: str, exercises: list[Exercise], path: Path, first: list[FirstAttempt] = ()) -> Path:
    sections = []
    for exercise in exercises:
        rows = []
        for key, hint, students in exercise.ranked():
            en, zh = label(key, hint)
            taught = taught_in(section(key, hint))
            rows.append(f'<tr><td class="count">{len(students)}</td><td><code>{html.escape(key)}</code>'
                        f'{"<br><code>" + html.escape(hint) + "</code>" if hint else ""}</td>'
                        f'<td>{html.escape(en)}<br><span class="zh">{html.escape(zh)}</span></td><td>{taught}</td>'
                        f'<td><details><summary>{len(students)}</summary>{html.escape(", ".join(students))}</details></td></tr>')
        table = ("<table><tr><th>students / 学生</th><th>message / 消息</th><th>what it says / 内容</th>"
                 "<th>taught in / 讲解位置</th><th>who / 名单</th></tr>" + "".join(rows) + "</table>") if rows else ""
        sections.append(f"<h2><code>{html.escape(exercise.grade_id)}</code> · {exercise.points:g} points / 分</h2>"
                        f"<p>{len(exercise.full)} of {len(exercise.graded)} students got every point · "
                        f'<span class="zh">{len(exercise.graded)} 名学生中有 {len(exercise.full)} 名得满分</span></p>'
                        f"{chart(exercise)}{table}")
    page = PAGE.format(
        title=f"What the class got wrong / 全班错在哪里 · {html.escape(assignment)}",
        intro_en=("For each exercise: how many students lost its points to each diagnostic of the course "
                  "(by message key, the same in both languages), and the lesson section that teaches the point."),
        intro_zh="每道练习：有多少名学生因课程的哪条诊断信息失分（按消息键统计，两种语言相同），以及讲解这一点的课程小节。",
        summary=class_summary(exercises), sections="\n".join(sections) + first_attempts_html(list(first)))
    path.write_text(page, encoding="utf-8")
    return path


def write(root: Path, assignment: str, out: Path) -> tuple[Path, Path]:
    """The page and the CSV of `assignment`'s graded class, written to the folder `out`."""
    exercises = read_class(Path(root), assignment)
    out.mkdir(parents=True, exist_ok=True)
    return (write_html(assignment, exercises, out / f"{assignment}.html", first_attempts(Path(root), assignment)),
            write_csv(assignment, exercises, out / f"{assignment}.csv"))
