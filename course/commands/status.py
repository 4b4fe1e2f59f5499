"""`course status`: per student, points so far and what still waits for grading by hand."""
from pathlib import Path

from autograder.messages import message

from .. import settings
from ..gradebook import print_hand_grading, print_late, registered
from . import is_course_with

HELP = "what still needs grading by hand / 还有哪些需要人工评分"


def arguments(parser):
    parser.add_argument("assignment")
    parser.add_argument("--root", default=".", help="course folder / 课程目录")


def run(args) -> int:
    """Per student: points so far, and what still waits for grading by hand in the formgrader."""
    root = Path(args.root).resolve()
    if not is_course_with(root, args.assignment, "status"):
        return 2
    db_url = settings.gradebook_url(settings.load(root))
    if not registered(db_url, args.assignment):
        print(message("not_registered", assignment=args.assignment, gradebook=db_url), flush=True)
        return 2
    print_late(db_url, args.assignment)
    print_hand_grading(db_url, args.assignment, every_student=True)
    return 0
