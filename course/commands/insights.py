"""`course insights`: what the class got wrong, per exercise and diagnostic, as a page and a CSV."""
from pathlib import Path

from . import registered_gradebook, say

HELP = "what the class got wrong, per exercise and diagnostic / 全班错在哪里：按练习和诊断信息统计"


def arguments(parser):
    parser.add_argument("assignment")
    parser.add_argument("--root", default=".", help="course folder / 课程目录")
    parser.add_argument("--out", help="folder for the page and the CSV (default: ROOT/insights) / "
                                      "页面和 CSV 所在目录（默认：ROOT/insights）")


def run(args) -> int:
    """Per exercise, how many students hit each diagnostic, as a bilingual page and a CSV."""
    from .. import insights

    root = Path(args.root).resolve()
    if registered_gradebook(root, args.assignment, "insights") is None:
        return 2
    page, table = insights.write(root, args.assignment, Path(args.out) if args.out else root / "insights")
    say(f"What the class got wrong: {page} (and {table})", f"全班错在哪里：{page}（以及 {table}）")
    return 0
