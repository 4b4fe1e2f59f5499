"""The student bundle: what a student installs, and nothing that gives answers away.

`make student-bundle` (or `python -m autograder.bundle DEST`) writes DEST/ and DEST.tar.gz with the
lessons, the release notebooks, the part of the `autograder` package that they import (the checks every
test cell calls, the messages, the simulated accelerators and probes the lessons use: found by following
the imports, so grading-only modules such as the sandbox and the fork server never ship), the student
environment (pyproject.toml; start.py, which installs it and starts JupyterLab on any system; a Makefile) and the student configuration (deploy/student/: nbgrader's
instructor extensions turned off, `nbgrader validate` without the grading sandbox). Nothing from
`source/` (solutions, hidden tests) or `tests/` (the mistake corpus). tests/test_student_bundle.py checks.
"""
import ast
import json
import re
import shutil
import sys
import tarfile
import tomllib
from importlib import metadata
from pathlib import Path

import nbformat

from .views import for_students

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "autograder"
STUDENT_FILES = ROOT / "deploy" / "student"   # README, Makefile, nbgrader and Jupyter configuration
# The student configuration imports these in nbgrader's own process (validate's kernel start-up).
CONFIG_IMPORTS = {"kernel"}
# Instructor-only requirements (monolingual views use OpenCC) stay out of the student environment.
INSTRUCTOR_ONLY_REQUIREMENTS = ("opencc",)


def assignments(root: Path = ROOT) -> list[str]:
    return sorted(p.parent.name for p in (root / "release").glob("*/*.ipynb") if p.stem == p.parent.name)


def student_notebooks(root: Path = ROOT) -> list[Path]:
    return sorted((root / "notebooks").glob("*.ipynb")) + sorted((root / "release").glob("*/*.ipynb"))


def _imported_modules(code: str, package_dir: Path, inside_package: bool) -> set[str]:
    """Modules of the package that `code` imports (absolute imports, and relative ones inside it)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:  # a notebook cell with IPython syntax (%magic, !shell): only import lines matter
        tree = ast.parse("\n".join(line for line in code.splitlines()
                                   if line.lstrip().startswith(("import ", "from "))))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith(PACKAGE + ".")}
            found |= {"__init__" for a in node.names if a.name.split(".")[0] == PACKAGE}
        elif isinstance(node, ast.ImportFrom):
            relative = inside_package and node.level == 1
            if node.module and (node.module.split(".")[0] == PACKAGE or relative):
                parts = node.module.split(".")[0 if relative else 1:]
                found.add("__init__")
                if parts:
                    found.add(parts[0])
            if node.module in (PACKAGE, None) and (node.module == PACKAGE or relative):
                # `from autograder import checks`: a name that is a module of the package
                found |= {a.name for a in node.names if (package_dir / f"{a.name}.py").exists()}
                found.add("__init__")
    return found


def student_modules(root: Path = ROOT) -> list[str]:
    """The package's modules the lessons and release notebooks import, directly or through each other."""
    package_dir = root / PACKAGE
    wanted = set(CONFIG_IMPORTS)
    for path in student_notebooks(root):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                wanted |= _imported_modules(cell.source, package_dir, inside_package=False)
    todo = list(wanted)
    while todo:
        module = todo.pop()
        imported = _imported_modules((package_dir / f"{module}.py").read_text("utf-8"), package_dir, True)
        todo += sorted(imported - wanted)
        wanted |= imported
    return sorted(wanted)


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
    data_files = "\n".join(f"{json.dumps(folder)} = {json.dumps(files)}" for folder, files in jupyter_data_files(root).items())
    return f"""# The student environment of the course (built by `make student-bundle` in the instructor's repository).
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "torch-to-course-student"
version = {json.dumps(project["version"])}
requires-python = {json.dumps(project["requires-python"])}
dependencies = {json.dumps(requirements(root), ensure_ascii=False)}

[tool.setuptools]
packages = [{json.dumps(PACKAGE)}]

[tool.setuptools.package-data]
{PACKAGE} = ["*.json"]

[tool.setuptools.data-files]
{data_files}
"""


def build(dest: Path, root: Path = ROOT) -> Path:
    """Write the bundle into `dest` (replaced if it exists) and `dest`.tar.gz; return the archive."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    shutil.copytree(STUDENT_FILES, dest, dirs_exist_ok=True)
    (dest / "pyproject.toml").write_text(pyproject(root), "utf-8")
    package = dest / PACKAGE
    package.mkdir()
    modules = student_modules(root)
    for module in modules:
        shutil.copy2(root / PACKAGE / f"{module}.py", package)
        if (root / PACKAGE / f"{module}.json").exists():  # messages.json: the catalogue messages.py reads
            shutil.copy2(root / PACKAGE / f"{module}.json", package)
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
