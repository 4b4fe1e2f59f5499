"""`course grade`: autograde a class with nbgrader, several submissions at a time (the work itself is
course/grading/), after checking the sandbox, the gradebook and the roster. The work is imported when the
command runs, so that `course --help` imports neither nbgrader nor the kernels."""
import argparse
import contextlib
import os
import sys
from pathlib import Path

from autograder.messages import Bilingual, message, text

from ..terminal import OwnLines, visible
from . import is_course_with, say

HELP = "autograde a class in parallel / 并行自动评分整个班级"


def arguments(parser):
    parser.add_argument("assignment")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="submissions at a time (default: CPU cores) / 同时评分的提交数（默认：CPU 核数）")
    parser.add_argument("--student", action="append", help="only this student (repeatable) / 只评这个学生（可重复）")
    parser.add_argument("--root", default=".", help="course folder / 课程目录")
    parser.add_argument("--force", action="store_true",
                        help="regrade every submission, also those graded since they were submitted (their "
                             "hand-graded answers are then flagged for review again, as with `nbgrader "
                             "autograde --force`) / 重新评分所有提交，包括提交后已评过分的（它们人工评分的答案"
                             "会再次被标记为待复核，与 `nbgrader autograde --force` 相同）")
    parser.add_argument("--no-fork-server", action="store_true",
                        help="start every kernel as a new process with its own imports / "
                             "每个内核都作为新进程启动并自行导入模块")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run submissions WITHOUT the sandbox, with all your rights (logged) / "
                             "不使用沙箱运行提交，拥有你的全部权限（会记录在日志中）")
    parser.add_argument("--help-all", action=SettingsHelp, nargs=0,
                        help="show every setting of grading (c.Sandbox..., c.SafeExecute..., in nbgrader_config.py) "
                             "and exit / 显示评分的全部设置（nbgrader_config.py 中的 c.Sandbox... 等）并退出")
    parser.add_argument("--shard", type=shard, metavar="I/N",
                        help="only shard I of N: the students whose id hashes to it (one cluster job per "
                             "shard; README, \"Beyond one machine\") / 只评 N 片中的第 I 片：学生编号的哈希值"
                             "落在该片的学生（集群上每片一个任务；见 README 的“超出一台机器”）")


def grading_classes() -> list:
    """The classes whose settings bound grading (nbgrader's own `--help-all` lists only nbgrader's classes)."""
    from ..kernels import sandbox
    from ..kernels.manager import GradingKernelManager
    from ..plugins.autograde import DecideGrades, SafeExecute

    return [sandbox.Sandbox, GradingKernelManager, SafeExecute, DecideGrades]


class SettingsHelp(argparse.Action):
    """`course grade --help-all`: traitlets' own help of every grading setting, as `nbgrader --help-all` shows nbgrader's."""

    def __call__(self, parser, namespace, values, option_string=None):
        for cls in grading_classes():
            print(cls.class_get_help())
        parser.exit()


def shard(given: str) -> tuple[int, int]:
    """`--shard I/N`: this job grades shard I of N (course.grading.shards.shard_of)."""
    index, _, count = given.partition("/")
    if not (index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise argparse.ArgumentTypeError(message("shard_invalid", given=given))
    return int(index), int(count)


def run(args) -> int:
    """Grade everything in submitted/ with nbgrader's autograde, several submissions at a time. Every line
    this command writes itself starts with course.terminal.OWN; lines quoted from a submission's grading log
    start with an indent and the student's name instead, so none of them can pass for one of its own."""
    terminal = sys.stdout
    with contextlib.redirect_stdout(OwnLines(terminal)):
        return _grade(args, quote=lambda lines: print(lines, file=terminal, flush=True))


def _grade(args, quote) -> int:
    from .. import grading, settings
    from ..gradebook import off_roster, print_hand_grading, print_late, registered
    from ..kernels import sandbox

    root = Path(args.root)
    if not is_course_with(root, args.assignment, "grade"):
        return 2
    config = settings.load(root)
    if args.no_sandbox:
        # logged here and by every kernel: submissions then run with all the rights of this user
        config.Sandbox.enabled = False
        shown = text("sandbox_disabled")
        say(shown.en, shown.zh)
    elif sandbox.enabled(config) and sandbox.problem(config):
        shown = text("sandbox_unavailable", reason=sandbox.problem(config))
        say(shown.en, shown.zh)
        return 2
    db_url = settings.gradebook_url(config)
    if not registered(db_url, args.assignment):
        print(message("not_registered", assignment=args.assignment, gradebook=db_url), flush=True)
        return 2
    students = args.student or grading.submitted_students(root.resolve(), args.assignment)
    if config.Autograde.get("create_student", True) is False:
        # nbgrader would refuse each of them with a traceback (MissingEntry), on every run: named once instead
        unknown = off_roster(db_url, students)
        if unknown:
            print(message("not_on_roster", students=", ".join(map(visible, unknown)), assignment=args.assignment), flush=True)
            students = [student for student in students if student not in unknown]
    outcome = grading.grade(Path(args.root), args.assignment, args.jobs, config, students,
                                progress=lambda line: print(line, flush=True),
                                fork_server=not args.no_fork_server, shard=args.shard, force=args.force,
                                quote=quote)
    say(f"Graded {len(outcome.graded)} submission(s) in {outcome.seconds:.1f} s with {args.jobs} job(s).",
        f"用 {args.jobs} 个并行任务在 {outcome.seconds:.1f} 秒内评完 {len(outcome.graded)} 份提交。")
    if outcome.unchanged:
        print(message("grade_unchanged", count=len(outcome.unchanged), assignment=args.assignment), flush=True)
    for student, error in sorted(outcome.failed.items()):
        error = error if isinstance(error, Bilingual) else Bilingual(error, error)
        student = visible(student)
        say(f"! {student}: not graded: {error.en}", f"! {student}：未评分：{error.zh}")
    print(message("grading_logs", folder=outcome.logs), flush=True)
    print_late(db_url, args.assignment)
    print_hand_grading(db_url, args.assignment)
    if not outcome.graded and not outcome.unchanged and not (args.shard and not outcome.failed):  # a shard may hold no student
        print(message("nothing_graded", assignment=args.assignment, folder=root.resolve() / "submitted"), flush=True)
        return 1
    return 0  # a submission nbgrader cannot grade is listed above; it is not a failure of grading
