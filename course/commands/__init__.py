"""The `course` subcommands, one module each: its help line, its arguments and what it runs.

    demo      grade the bundled demo class with plain nbgrader commands and show the results
    report    what the tests catch in the mistake corpus, answer by answer
    setup     register every assignment (and roster.csv) in the gradebook
    status    what still waits for grading by hand
    grade     autograde a class, several submissions at a time (the work: course/grading/)
    merge     bring the shards' autograded/ folders back into one course folder
    insights  what the class got wrong, per exercise and diagnostic
    view      monolingual copies of notebooks
"""
from pathlib import Path

from autograder.messages import message

NAMES = ("demo", "report", "setup", "status", "grade", "merge", "insights", "view")


def say(en, zh):
    """One line in English, then the same in Chinese."""
    print(en)
    print(zh, flush=True)


def assignments_in(root: Path) -> list[str]:
    """The assignments of the course folder `root`: its source/ folders."""
    source = Path(root) / "source"
    return sorted(p.name for p in source.iterdir() if p.is_dir() and not p.name.startswith(".")) if source.is_dir() else []


def is_course_with(root: Path, assignment: str, command: str) -> bool:
    """Whether `root` is a course folder holding `assignment`; if not, one bilingual line that says what
    is wrong and what there is instead (the usual slips: another folder, a shortened or misspelt name)."""
    root = Path(root).resolve()
    if not (root / "nbgrader_config.py").is_file():
        print(message("not_a_course_folder", folder=root, command=command), flush=True)
        return False
    if assignment not in assignments_in(root):
        print(message("unknown_assignment", assignment=assignment, folder=root,
                      assignments=", ".join(assignments_in(root)) or "—"), flush=True)
        return False
    return True


def registered_gradebook(root: Path, assignment: str, command: str) -> str | None:
    """The gradebook of the course folder `root`, where `assignment` is registered; None after one bilingual
    line that says what is wrong (not a course folder, no such assignment, not registered yet)."""
    from .. import settings
    from ..gradebook import registered

    if not is_course_with(root, assignment, command):
        return None
    db_url = settings.gradebook_url(settings.load(root))
    if not registered(db_url, assignment):
        print(message("not_registered", assignment=assignment, gradebook=db_url), flush=True)
        return None
    return db_url
