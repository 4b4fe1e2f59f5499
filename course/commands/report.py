"""`course report`: grade the mistake corpus and show, answer by answer, what the tests catch."""
from . import demo, say

HELP = "what the tests catch, answer by answer / 逐个答案展示测试发现了什么"


def arguments(parser):
    demo.arguments(parser, "report")
    parser.add_argument("--reuse", action="store_true", help="read a class already graded in --root / 读取 --root 中已评分的班级")


def run(args) -> int:
    """Grade the mistake corpus and show, answer by answer, what the tests catch."""
    graded = demo.grade_corpus_class(args)
    print_report(graded)
    return demo.finish(graded)


def print_report(graded):
    """exercise × answer → points, and the diagnostic the student saw."""
    rows = []
    for student, answers in graded.students.items():
        shown = graded.diagnostics(student)
        for answer in answers:
            cell = f"test_{answer.exercise}"
            points = graded.scores.get(student, {}).get(cell)
            rows.append((answer, points, shown.get(cell, "")))
    print()
    print(f"{'exercise':20} {'answer':40} {'kind':8} {'points':7} diagnostic")
    for answer, points, shown in sorted(rows, key=lambda r: (r[0].exercise, r[0].correct, r[0].id)):
        kind = "right" if answer.correct else "wrong"
        first = shown.splitlines()[:2] if shown else ["—"]
        print(f"{answer.exercise:20} {answer.id:40} {kind:8} {points if points is not None else '?':<7} {first[0]}")
        for line in first[1:]:
            print(" " * 79 + line)
    wrong = [r for r in rows if not r[0].correct]
    right = [r for r in rows if r[0].correct]
    caught = sum(1 for _, points, _ in wrong if points == 0)
    full = graded.scores["solution"]  # the instructor's solution earns every point
    kept = sum(1 for answer, points, _ in right if points == full[f"test_{answer.exercise}"])
    print()
    say(f"{graded.assignment}: {len(rows)} answers; {caught}/{len(wrong)} mistakes caught; "
        f"{kept}/{len(right)} correct answers kept full marks.",
        f"{graded.assignment}：共 {len(rows)} 个答案；发现 {caught}/{len(wrong)} 个错误；"
        f"{kept}/{len(right)} 个正确答案得到满分。")
