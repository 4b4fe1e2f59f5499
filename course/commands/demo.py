"""`course demo`: grade the bundled demo class from scratch with plain nbgrader commands and print the
results. `course report` shares how the corpus class is graded and summed up."""
from pathlib import Path

from autograder.messages import message

from . import say

HELP = "grade the bundled demo class / 为自带的演示班级评分"


def arguments(parser, name="demo"):
    parser.add_argument("--root", default=f"build/{name}", help="course folder to create / 要创建的课程目录")
    parser.add_argument("--assignment", default="a1_tensor_to", help="assignment to grade / 要评分的作业")


def run(args) -> int:
    """Grade the bundled demo class from scratch with plain nbgrader commands and print the results."""
    from .. import insights

    graded = grade_corpus_class(args)
    print_scores(graded)
    print_diagnostics(graded)
    page, _ = insights.write(graded.root, graded.assignment, graded.root / "insights")
    say(f"What the class got wrong: {page}", f"全班错在哪里：{page}")
    return finish(graded)


def grade_corpus_class(args):
    """The corpus class, graded (a classroom.GradedClass)."""
    from .. import classroom

    root = Path(args.root).resolve()
    say(f"Course folder: {root}", f"课程目录：{root}")
    say(f"Autograding with `nbgrader autograde {args.assignment}` …",
        f"正在用 `nbgrader autograde {args.assignment}` 自动评分……")
    return classroom.grade_demo_class(root, args.assignment, progress=lambda line: print(line, flush=True),
                                      reuse=getattr(args, "reuse", False))


def finish(graded) -> int:
    from .. import classroom

    log = graded.root / "autograde.log"
    for student in graded.not_graded:
        say(f"! {student}: not graded, the file is not a readable notebook (see {log}).",
            f"! {student}：未评分，文件不是可读取的笔记本（见 {log}）。")
    say(f"Grades: {graded.root / 'grades.csv'} · feedback: {graded.root / 'feedback'}",
        f"成绩：{graded.root / 'grades.csv'} · 反馈：{graded.root / 'feedback'}")
    # the broken file is part of the demonstration; any other ungraded submission is a failure
    return 1 if set(graded.not_graded) - {classroom.BROKEN} else 0


def print_scores(graded):
    """The class's autograded points per test cell, under a row of each cell's maximum, students in
    natural order (mistakes-2 before mistakes-10), then what waits for hand grading."""
    from .. import classroom

    cells = sorted({cell for grades in graded.scores.values() for cell in grades})
    maximum = classroom.max_points(graded.assignment, graded.root)
    width = max(len(s) for s in [*graded.scores, "max"]) + 2
    column = max([12, *(len(c.removeprefix("test_")) + 1 for c in cells)])
    print()
    print("student".ljust(width) + " ".join(c.removeprefix("test_").ljust(column) for c in cells) + " total")
    rows = [("max", maximum), *sorted(graded.scores.items(), key=lambda item: classroom.natural_order(item[0]))]
    for student, grades in rows:
        row = " ".join(f"{grades.get(c, 0):g}".ljust(column) for c in cells)
        print(student.ljust(width) + row + f" {sum(grades.get(c, 0) for c in cells):g}")
    hand = classroom.hand_graded_points(graded.assignment, graded.root)
    print(message("demo_hand_points", autograded=sum(maximum.values()), hand=sum(hand.values()),
                  cells=", ".join(hand), total=sum(maximum.values()) + sum(hand.values())))
    print()


def print_diagnostics(graded):
    for student in sorted(graded.scores):
        for cell, shown in graded.diagnostics(student).items():
            print(f"- {student} · {cell}:")
            for line in shown.splitlines()[:2]:
                print(f"    {line}")
