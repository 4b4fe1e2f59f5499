"""`course view`: monolingual copies of notebooks (not committed: views/ is ignored)."""
from pathlib import Path


HELP = "monolingual copies of notebooks / 生成单语版本的笔记本"


def arguments(parser):
    parser.add_argument("--lang", required=True, choices=["en", "zh", "zh-hant"])
    parser.add_argument("--out", default="views", help="folder for the copies / 副本所在目录")
    parser.add_argument("notebooks", nargs="+")


def run(args) -> int:
    """Write monolingual copies of notebooks (not committed: views/ is ignored)."""
    from ..authoring.monolingual import write_views

    for path in write_views(args.notebooks, args.lang, Path(args.out)):
        print(path)
    return 0
