"""`course merge`: bring the shards' autograded/ folders back into one course folder (README, "Beyond one machine")."""
from pathlib import Path

from autograder.messages import message


HELP = "copy the shards' autograded/ folders into one course folder / 把各片的 autograded/ 目录复制到一个课程目录中"


def arguments(parser):
    parser.add_argument("assignment")
    parser.add_argument("shard_roots", nargs="+", metavar="SHARD_FOLDER",
                        help="the shards' course folders / 各片的课程目录")
    parser.add_argument("--root", default=".", help="course folder to merge into / 合并到的课程目录")


def run(args) -> int:
    """Bring the shards' autograded/ folders back into one course folder (README, "Beyond one machine")."""
    from ..grading.shards import merge

    try:
        merged = merge(Path(args.root), args.assignment, args.shard_roots)
    except ValueError as error:
        print(f"! {error}", flush=True)
        return 2
    print(message("merged", students=len(merged), shards=len(args.shard_roots),
                  folder=Path(args.root).resolve(), assignment=args.assignment), flush=True)
    return 0
