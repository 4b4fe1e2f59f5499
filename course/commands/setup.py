"""`course setup`: register every assignment (and roster.csv) in the course's gradebook."""
import subprocess
import sys
from pathlib import Path

from autograder.messages import message


HELP = "register every assignment (and roster.csv) in the gradebook / 把每个作业（以及 roster.csv）登记到成绩册"


def arguments(parser):
    parser.add_argument("--root", default=".", help="course folder / 课程目录")


def run(args) -> int:
    """Register every assignment of release/ in the course's gradebook (and roster.csv, if there is one),
    with nbgrader's own commands, so that collect, autograde and the formgrader know them. Idempotent."""
    from nbgrader.apps import NbGraderAPI

    from .. import settings

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
