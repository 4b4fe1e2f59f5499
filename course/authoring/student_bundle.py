"""The student bundle: what a student installs, and nothing that gives answers away.

`make student-bundle` (or `python -m course.authoring.student_bundle DEST`) writes DEST/ and DEST.tar.gz
with the lessons, the release notebooks, the `autograder` package whole (what runs in a student's or a
grading kernel: the checks every test cell calls, the messages, the simulated accelerators and probes;
the instructor's side is the `course` package, which never ships), the student environment
(pyproject.toml; start.py, which installs it and starts JupyterLab on any system; a Makefile) and the
student configuration (deploy/student/: nbgrader's instructor extensions turned off, `nbgrader validate`
without the grading sandbox). Nothing from `source/` (solutions, hidden tests), `tests/` or `course/`
(the mistake corpus). tests/system/test_student_bundle.py checks.
"""
import re
import shutil
import sys
import tarfile
import tomllib
from importlib import metadata
from pathlib import Path

import nbformat
import tomli_w

from ..classroom import ROOT
from .monolingual import for_students

PACKAGE = "autograder"  # what runs in a student's or a grading kernel: shipped whole
STUDENT_FILES = ROOT / "deploy" / "student"   # README, Makefile, nbgrader and Jupyter configuration
# Instructor-only requirements (monolingual views use OpenCC) stay out of the student environment.
INSTRUCTOR_ONLY_REQUIREMENTS = ("opencc", "tomli-w")


def assignments(root: Path = ROOT) -> list[str]:
    return sorted(p.parent.name for p in (root / "release").glob("*/*.ipynb") if p.stem == p.parent.name)


def student_packages(root: Path = ROOT) -> list[str]:
    """The `autograder` package and its subpackages (`autograder.checks`), as setuptools names them."""
    return [".".join(init.parent.relative_to(root).parts) for init in (root / PACKAGE).rglob("__init__.py")]


def requirements(root: Path = ROOT) -> list[str]:
    """The course's requirements for students, with torch pinned to the grader's version (the one that
    builds the bundle): a student's notebook runs on the PyTorch its grade is decided on. The local label
    (`+cpu`, `+cu128`) is dropped, so that pip picks the build that suits the student's machine."""
    project = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["project"]
    grader_torch = f"torch=={metadata.version('torch').split('+')[0]}"
    return [grader_torch if re.match(r"torch\b", r) else r
            for r in project["dependencies"] if not r.startswith(INSTRUCTOR_ONLY_REQUIREMENTS)]


def jupyter_data_files(root: Path = ROOT) -> dict[str, list[str]]:
    """deploy/student/etc/jupyter as data files of the package: `pip install .` puts them into the
    environment's etc/jupyter, next to what installing nbgrader put there (as nbgrader installs its own),
    so the instructor tools are off however the student installs (make, start.py, plain pip)."""
    files = sorted(p.relative_to(STUDENT_FILES) for p in (STUDENT_FILES / "etc").rglob("*") if p.is_file())
    folders: dict[str, list[str]] = {}
    for path in files:
        folders.setdefault(path.parent.as_posix(), []).append(path.as_posix())
    return folders


def pyproject(root: Path = ROOT) -> str:
    project = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["project"]
    student = {
        "build-system": {"requires": ["setuptools>=68"], "build-backend": "setuptools.build_meta"},
        "project": {"name": "torch-to-course-student", "version": project["version"],
                    "requires-python": project["requires-python"], "dependencies": requirements(root)},
        "tool": {"setuptools": {"packages": sorted(student_packages(root)),
                                "package-data": {PACKAGE: ["*.json"]},
                                "data-files": jupyter_data_files(root)}},
    }
    return ("# The student environment of the course (built by `make student-bundle` in the instructor's "
            "repository).\n" + tomli_w.dumps(student))


def build(dest: Path, root: Path = ROOT) -> Path:
    """Write the bundle into `dest` (replaced if it exists) and `dest`.tar.gz; return the archive."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    shutil.copytree(STUDENT_FILES, dest, dirs_exist_ok=True)
    (dest / "pyproject.toml").write_text(pyproject(root), "utf-8")
    shutil.copytree(root / PACKAGE, dest / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "notebooks" / "figures").mkdir(parents=True)
    for lesson in sorted((root / "notebooks").glob("*.ipynb")):  # no answer printed under a prompt
        nbformat.write(for_students(nbformat.read(lesson, as_version=4)), dest / "notebooks" / lesson.name)
    for figure in sorted((root / "notebooks" / "figures").glob("*.svg")):
        shutil.copy2(figure, dest / "notebooks" / "figures")
    for assignment in assignments(root):
        shutil.copytree(root / "release" / assignment, dest / "release" / assignment,
                        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    archive = dest.with_name(dest.name + ".tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(dest, arcname="torch-to-student")
    return archive


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    dest = Path(argv[0] if argv else ROOT / "build" / "student-bundle")
    archive = build(dest)
    print(f"student bundle / 学生包: {dest}/ and / 和 {archive}")


if __name__ == "__main__":
    main()
