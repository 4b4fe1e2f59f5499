"""`course`: the instructor's command line."""
import argparse
import os
import sys
from pathlib import Path

from autograder.messages import Bilingual, message, text

from . import classroom, insights, settings
from .kernels import sandbox


def demo(args) -> int:
    """Grade the bundled demo class from scratch with plain nbgrader commands and print the results."""
    graded = grade_corpus_class(args)
    print_scores(graded)
    print_diagnostics(graded)
    page, _ = insights.write(graded.root, graded.assignment, graded.root / "insights")
    say(f"What the class got wrong: {page}", f"全班错在哪里：{page}")
    return finish(graded)


def class_insights(args) -> int:
    """Per exercise, how many students hit each diagnostic, as a bilingual page and a CSV."""
    root = Path(args.root).resolve()
    page, table = insights.write(root, args.assignment, Path(args.out) if args.out else root / "insights")
    say(f"What the class got wrong: {page} (and {table})", f"全班错在哪里：{page}（以及 {table}）")
    return 0


def report(args) -> int:
    """Grade the mistake corpus and show, answer by answer, what the tests catch."""
    graded = grade_corpus_class(args)
    print_report(graded)
    return finish(graded)


def grade_corpus_class(args) -> classroom.GradedClass:
    root = Path(args.root).resolve()
    say(f"Course folder: {root}", f"课程目录：{root}")
    say(f"Autograding with `nbgrader autograde {args.assignment}` …",
        f"正在用 `nbgrader autograde {args.assignment}` 自动评分……")
    return classroom.grade_demo_class(root, args.assignment, progress=lambda line: print(line, flush=True),
                                      reuse=getattr(args, "reuse", False))


def finish(graded) -> int:
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


def grade_class(args) -> int:
    """Grade everything in submitted/ with nbgrader's autograde, several submissions at a time."""
    from .grade import grade as grade_in_parallel

    root = Path(args.root)
    if not (root / "nbgrader_config.py").exists() or not (root / "source" / args.assignment).is_dir():
        say(f"! {root.resolve()} is not a course folder with source/{args.assignment} and nbgrader_config.py.",
            f"! {root.resolve()} 不是包含 source/{args.assignment} 和 nbgrader_config.py 的课程目录。")
        return 2
    config = settings.load(root)
    if args.no_sandbox:
        # logged here and by every kernel: submissions then run with all the rights of this user
        config.Sandbox.enabled = False
        shown = text("sandbox_disabled")
        say(shown.en, shown.zh)
    elif sandbox.enabled(config) and sandbox.problem():
        shown = text("sandbox_unavailable", reason=sandbox.problem())
        say(shown.en, shown.zh)
        return 2
    db_url = settings.gradebook_url(config)
    if not registered(db_url, args.assignment):
        print(message("not_registered", assignment=args.assignment, gradebook=db_url), flush=True)
        return 2
    warn_not_on_roster(root, db_url, args.assignment)
    outcome = grade_in_parallel(Path(args.root), args.assignment, args.jobs, config, args.student or None,
                                progress=lambda line: print(line, flush=True),
                                fork_server=not args.no_fork_server, shard=args.shard, force=args.force)
    say(f"Graded {len(outcome.graded)} submission(s) in {outcome.seconds:.1f} s with {args.jobs} job(s).",
        f"用 {args.jobs} 个并行任务在 {outcome.seconds:.1f} 秒内评完 {len(outcome.graded)} 份提交。")
    if outcome.unchanged:
        print(message("grade_unchanged", count=len(outcome.unchanged), assignment=args.assignment), flush=True)
    for student, error in sorted(outcome.failed.items()):
        error = error if isinstance(error, Bilingual) else Bilingual(error, error)
        say(f"! {student}: not graded: {error.en}", f"! {student}：未评分：{error.zh}")
    print(message("grading_logs", folder=outcome.logs), flush=True)
    print_hand_grading(db_url, args.assignment)
    if not outcome.graded and not outcome.unchanged and not (args.shard and not outcome.failed):  # a shard may hold no student
        print(message("nothing_graded", assignment=args.assignment, folder=root.resolve() / "submitted"), flush=True)
        return 1
    return 0  # a submission nbgrader cannot grade is listed above; it is not a failure of grading


def setup(args) -> int:
    """Register every assignment of release/ in the course's gradebook (and roster.csv, if there is one),
    with nbgrader's own commands, so that collect, autograde and the formgrader know them. Idempotent."""
    import subprocess

    from nbgrader.apps import NbGraderAPI

    root = Path(args.root).resolve()
    config = settings.load(root)
    api = NbGraderAPI(config=config)
    db_url = settings.gradebook_url(config)
    failed = False
    for assignment in sorted(p.name for p in (root / "release").iterdir() if (root / "source" / p.name).is_dir()):
        # generate_assignment is what records an assignment, its notebooks and its test cells (with
        # the hidden tests OverwriteCells puts back); it rewrites release/ identically from source/
        result = api.generate_assignment(assignment, force=True)
        if not result["success"]:
            print(message("setup_failed", assignment=assignment, log=result.get("error") or result.get("log")))
            failed = True
            continue
        notebooks = len(list((root / "source" / assignment).glob("*.ipynb")))
        print(message("setup_registered", assignment=assignment, gradebook=db_url, notebooks=notebooks), flush=True)
    roster = root / "roster.csv"
    if roster.exists():
        nbgrader = Path(sys.executable).parent / "nbgrader"
        done = subprocess.run([str(nbgrader), "db", "student", "import", str(roster)], cwd=root,
                              capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stdout + done.stderr)
            return 1
        with open(roster, encoding="utf-8") as lines:
            count = sum(1 for line in lines if line.strip()) - 1  # after the header: id,first_name,...
        print(message("setup_roster", count=count, roster=roster), flush=True)
    return 1 if failed else 0


def status(args) -> int:
    """Per student: points so far, and what still waits for grading by hand in the formgrader."""
    root = Path(args.root).resolve()
    db_url = settings.gradebook_url(settings.load(root))
    if not registered(db_url, args.assignment):
        print(message("not_registered", assignment=args.assignment, gradebook=db_url), flush=True)
        return 2
    print_hand_grading(db_url, args.assignment, every_student=True)
    return 0


def registered(db_url: str, assignment: str) -> bool:
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url) as gradebook:
        try:
            return bool(gradebook.find_assignment(assignment).notebooks)
        except MissingEntry:
            return False


def warn_not_on_roster(root: Path, db_url: str, assignment: str):
    from nbgrader.api import Gradebook

    from .grade import submitted_students

    if not (root / "roster.csv").exists():
        return
    with Gradebook(db_url) as gradebook:
        known = {student.id for student in gradebook.students}
    unknown = [s for s in submitted_students(root.resolve(), assignment) if s not in known]
    if unknown:
        print(message("not_on_roster", students=", ".join(unknown), assignment=assignment), flush=True)


def print_hand_grading(db_url: str, assignment: str, every_student=False):
    """What nbgrader's gradebook says still needs a person (`needs_manual_grade`), per student."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gradebook:
        submissions = sorted(gradebook.assignment_submissions(assignment), key=lambda s: s.student_id)
        waiting = 0
        for submission in submissions:
            grades = [g for n in submission.notebooks for g in n.grades]
            fields = dict(student=submission.student_id, score=submission.score, max_score=submission.max_score)
            if any(is_test_grade(g) and g.auto_score is None and g.manual_score is None for g in grades):
                # a test cell without a score: autograde never got through this submission (a file that
                # is not a notebook, say); nothing in it waits for a person yet
                print(message("status_not_autograded", student=submission.student_id, assignment=assignment))
                continue
            cells = [g.name for g in grades if g.needs_manual_grade]
            waiting += bool(cells)
            if cells:
                print(message("status_waiting", cells=", ".join(cells), **fields))
            elif every_student:
                print(message("status_done", **fields))
        if waiting:
            print(message("status_summary", assignment=assignment, waiting=waiting, total=len(submissions)), flush=True)
        else:
            print(message("status_all_graded", assignment=assignment, total=len(submissions)), flush=True)


def is_test_grade(grade) -> bool:
    """The grade of an autograded test cell: a code cell that is graded but is not an answer (a code answer graded by
    hand is a solution cell too, and has no score until a person gives it one)."""
    cell = grade.cell
    return cell.cell_type == "code" and cell.name not in {s.name for s in cell.notebook.solution_cells}


def shard(given: str) -> tuple[int, int]:
    """`--shard I/N`: this job grades shard I of N (course.grade.shard_of)."""
    index, _, count = given.partition("/")
    if not (index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise argparse.ArgumentTypeError(message("shard_invalid", given=given))
    return int(index), int(count)


def merge(args) -> int:
    """Bring the shards' autograded/ folders back into one course folder (README, "Beyond one machine")."""
    from .grade import merge as merge_shards

    try:
        merged = merge_shards(Path(args.root), args.assignment, args.shard_roots)
    except ValueError as error:
        print(f"! {error}", flush=True)
        return 2
    print(message("merged", students=len(merged), shards=len(args.shard_roots),
                  folder=Path(args.root).resolve(), assignment=args.assignment), flush=True)
    return 0


def view(args) -> int:
    """Write monolingual copies of notebooks (not committed: views/ is ignored)."""
    from .authoring.monolingual import write_views

    for path in write_views(args.notebooks, args.lang, Path(args.out)):
        print(path)
    return 0


def say(en, zh):
    print(en)
    print(zh, flush=True)


class BilingualParser(argparse.ArgumentParser):
    """argparse, whose own error lines are English only, followed by what they mean in Chinese."""

    def error(self, problem):
        self.print_usage(sys.stderr)
        self.exit(2, message("cli_error", prog=self.prog, problem=problem) + "\n")


def main(argv=None) -> int:
    parser = BilingualParser(prog="course", description=message("cli_description"))
    commands = parser.add_subparsers(dest="command", required=True)
    for name, run, help_text in [
        ("demo", demo, "grade the bundled demo class / 为自带的演示班级评分"),
        ("report", report, "what the tests catch, answer by answer / 逐个答案展示测试发现了什么"),
    ]:
        command = commands.add_parser(name, help=help_text)
        command.add_argument("--root", default=f"build/{name}", help="course folder to create / 要创建的课程目录")
        command.add_argument("--assignment", default="a1_tensor_to", help="assignment to grade / 要评分的作业")
        command.set_defaults(run=run)
    run_setup = commands.add_parser("setup", help="register every assignment (and roster.csv) in the gradebook / "
                                                  "把每个作业（以及 roster.csv）登记到成绩册")
    run_setup.add_argument("--root", default=".", help="course folder / 课程目录")
    run_setup.set_defaults(run=setup)
    run_status = commands.add_parser("status", help="what still needs grading by hand / 还有哪些需要人工评分")
    run_status.add_argument("assignment")
    run_status.add_argument("--root", default=".", help="course folder / 课程目录")
    run_status.set_defaults(run=status)
    run_grade = commands.add_parser("grade", help="autograde a class in parallel / 并行自动评分整个班级")
    run_grade.add_argument("assignment")
    run_grade.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                           help="submissions at a time (default: CPU cores) / 同时评分的提交数（默认：CPU 核数）")
    run_grade.add_argument("--student", action="append", help="only this student (repeatable) / 只评这个学生（可重复）")
    run_grade.add_argument("--root", default=".", help="course folder / 课程目录")
    run_grade.add_argument("--force", action="store_true",
                           help="regrade every submission, also those graded since they were submitted (their "
                                "hand-graded answers are then flagged for review again, as with `nbgrader "
                                "autograde --force`) / 重新评分所有提交，包括提交后已评过分的（它们人工评分的答案"
                                "会再次被标记为待复核，与 `nbgrader autograde --force` 相同）")
    run_grade.add_argument("--no-fork-server", action="store_true",
                           help="start every kernel as a new process with its own imports / "
                                "每个内核都作为新进程启动并自行导入模块")
    run_grade.add_argument("--no-sandbox", action="store_true",
                           help="run submissions WITHOUT the sandbox, with all your rights (logged) / "
                                "不使用沙箱运行提交，拥有你的全部权限（会记录在日志中）")
    run_grade.add_argument("--shard", type=shard, metavar="I/N",
                           help="only shard I of N: the students whose id hashes to it (one cluster job per "
                                "shard; README, \"Beyond one machine\") / 只评 N 片中的第 I 片：学生编号的哈希值"
                                "落在该片的学生（集群上每片一个任务；见 README 的“超出一台机器”）")
    run_grade.set_defaults(run=grade_class)
    run_merge = commands.add_parser("merge", help="copy the shards' autograded/ folders into one course folder / "
                                                  "把各片的 autograded/ 目录复制到一个课程目录中")
    run_merge.add_argument("assignment")
    run_merge.add_argument("shard_roots", nargs="+", metavar="SHARD_FOLDER",
                           help="the shards' course folders / 各片的课程目录")
    run_merge.add_argument("--root", default=".", help="course folder to merge into / 合并到的课程目录")
    run_merge.set_defaults(run=merge)
    run_insights = commands.add_parser("insights", help="what the class got wrong, per exercise and diagnostic / "
                                                        "全班错在哪里：按练习和诊断信息统计")
    run_insights.add_argument("assignment")
    run_insights.add_argument("--root", default=".", help="course folder / 课程目录")
    run_insights.add_argument("--out", help="folder for the page and the CSV (default: ROOT/insights) / "
                                            "页面和 CSV 所在目录（默认：ROOT/insights）")
    run_insights.set_defaults(run=class_insights)
    run_view = commands.add_parser("view", help="monolingual copies of notebooks / 生成单语版本的笔记本")
    run_view.add_argument("--lang", required=True, choices=["en", "zh", "zh-hant"])
    run_view.add_argument("--out", default="views", help="folder for the copies / 副本所在目录")
    run_view.add_argument("notebooks", nargs="+")
    run_view.set_defaults(run=view)
    commands.choices["report"].add_argument(
        "--reuse", action="store_true", help="read a class already graded in --root / 读取 --root 中已评分的班级")
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
