"""`course`: the instructor's command line (`course demo`, …)."""
import argparse
import sys
from pathlib import Path

from . import classroom
from .messages import message

UNTOUCHED = "untouched"   # submitted the release notebook as it is
BROKEN = "broken-json"    # a file that is not a notebook at all


def demo(args) -> int:
    """Grade the bundled demo class from scratch with plain nbgrader commands and print the results."""
    root, assignment = Path(args.root).resolve(), args.assignment
    say(f"Course folder: {root}", f"课程目录：{root}")
    classroom.prepare_course(root, assignment)

    students = classroom.students_from_corpus(classroom.load_corpus(assignment))
    for student, answers in students.items():
        classroom.submit(root, assignment, student, classroom.solved_notebook(root, assignment, answers))
    release = classroom.notebook_path(root, "release", assignment)
    classroom.submit(root, assignment, UNTOUCHED, raw=release.read_bytes())
    classroom.submit(root, assignment, BROKEN, raw=b'{"cells": [ this is not JSON')
    total = len(students) + 2

    done = []

    def progress(line):
        # nbgrader logs "Sanitizing <root>/submitted/<student>/<assignment>/..." once per submission
        if "Sanitizing" in line and "/submitted/" in line:
            done.append(line)
            student = line.split("/submitted/")[1].split("/")[0]
            print(f"  [{len(done)}/{total}] {student}", flush=True)

    say(f"Autograding {total} submissions with `nbgrader autograde {assignment}` …",
        f"正在用 `nbgrader autograde {assignment}` 自动评分 {total} 份提交……")
    code, log = classroom.nbgrader(root, "autograde", assignment, check=False, stream=progress)
    scores = classroom.scores(root, assignment)
    failed = sorted((set(students) | {UNTOUCHED, BROKEN}) - set(scores))
    classroom.nbgrader(root, "generate_feedback", assignment)
    classroom.nbgrader(root, "export")

    print_table(root, assignment, scores)
    for student in failed:
        say(f"! {student}: not graded, the file is not a readable notebook (see {root / 'nbgrader.log'}).",
            f"! {student}：未评分，文件不是可读取的笔记本（见 {root / 'nbgrader.log'}）。")
    (root / "nbgrader.log").write_text(log, "utf-8")
    say(f"Grades: {root / 'grades.csv'} · feedback: {root / 'feedback'}",
        f"成绩：{root / 'grades.csv'} · 反馈：{root / 'feedback'}")
    unexpected = [s for s in failed if s != BROKEN]
    return 1 if unexpected else 0


def print_table(root, assignment, scores):
    cells = sorted({cell for grades in scores.values() for cell in grades})
    width = max(len(s) for s in scores) + 2
    print()
    print("student".ljust(width) + " ".join(c.removeprefix("test_").ljust(12) for c in cells) + "total")
    for student, grades in sorted(scores.items()):
        row = " ".join(f"{grades.get(c, 0):g}".ljust(12) for c in cells)
        print(student.ljust(width) + row + f"{sum(grades.values()):g}")
    print()
    for student in sorted(scores):
        for cell, shown in classroom.diagnostics(root, assignment, student).items():
            print(f"- {student} · {cell}:")
            for line in shown.splitlines()[:2]:
                print(f"    {line}")


def say(en, zh):
    print(en)
    print(zh, flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="course", description=message("cli_description"))
    commands = parser.add_subparsers(dest="command", required=True)
    run_demo = commands.add_parser("demo", help="grade the bundled demo class / 为自带的演示班级评分")
    run_demo.add_argument("--root", default="build/demo", help="course folder to create / 要创建的课程目录")
    run_demo.add_argument("--assignment", default="a1_tensor_to")
    run_demo.set_defaults(run=demo)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
