"""`course status`: per student, points so far and what still waits for grading by hand."""
from pathlib import Path

from . import registered_gradebook

HELP = "what still needs grading by hand / 还有哪些需要人工评分"


def arguments(parser):
    parser.add_argument("assignment")
    parser.add_argument("--root", default=".", help="course folder / 课程目录")


def run(args) -> int:
    """Per student: points so far, and what still waits for grading by hand in the formgrader."""
    from ..gradebook import print_hand_grading, print_late

    root = Path(args.root).resolve()
    db_url = registered_gradebook(root, args.assignment, "status")
    if db_url is None:
        return 2
    print_late(db_url, args.assignment)
    print_hand_grading(db_url, args.assignment, every_student=True)
    return 0
