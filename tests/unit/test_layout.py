"""The layout (issue 24; README, "Layout"): `autograder` is what runs in a student's or a grading kernel and
never imports the instructor's `course` package, in any of its modules; an old configuration that names a
module that moved to `course` stops with the one-line fix instead of grading without the course's plugins."""
import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
from traitlets.utils.importstring import import_item

import autograder
from course import classroom
from course.authoring import student_bundle
from support.messages import shows
from support.paths import BIN

PACKAGE = student_bundle.ROOT / "autograder"
KERNEL_MODULES = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py"))
# what the course's nbgrader_config.py named before the move (and a course folder's copy of it may still
# name), with where it lives now
OLD_CONFIGURATION = {
    "autograder.grading.DropMalformedMetadata": "course.plugins.autograde.DropMalformedMetadata",
    "autograder.grading.ForgetUnknownCells": "course.plugins.autograde.ForgetUnknownCells",
    "autograder.grading.OverwriteCellsQuietly": "course.plugins.autograde.OverwriteCellsQuietly",
    "autograder.grading.SafeExecute": "course.plugins.autograde.SafeExecute",
    "autograder.grading.DecideGrades": "course.plugins.autograde.DecideGrades",
    "autograder.feedback.RequireHandGrading": "course.plugins.feedback.RequireHandGrading",
    "autograder.feedback.HideHiddenTests": "course.plugins.feedback.HideHiddenTests",
    "autograder.feedback.WrapDiagnostics": "course.plugins.feedback.WrapDiagnostics",
    "autograder.feedback.FeedbackExporter": "course.plugins.feedback.FeedbackExporter",
    "autograder.feedback.CsvExportWarningUngraded": "course.plugins.feedback.CsvExportWarningUngraded",
    "autograder.feedback.TEMPLATE_BASEDIRS": "course.plugins.feedback.TEMPLATE_BASEDIRS",
    "autograder.formgrade.content_security_policy": "course.plugins.formgrade.content_security_policy",
    "autograder.formgrade.TEMPLATE": "course.plugins.formgrade.TEMPLATE",
    "autograder.sandbox.NO_SANDBOX_VARIABLE": "course.kernels.sandbox.NO_SANDBOX_VARIABLE",
    "autograder.sandbox.use_for_nbgrader": "course.kernels.manager.use_for_nbgrader",
    "autograder.sandbox.GradingKernelManager": "course.kernels.manager.GradingKernelManager",
}


def named_modules(path: Path) -> set[str]:
    """Every module a file's code names: its imports (relative ones resolved inside `autograder`) and the
    dotted strings it could hand to importlib."""
    tree = ast.parse(path.read_text("utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add("autograder" + (f".{node.module}" if node.module else "") if node.level else node.module)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"[\w.]+", node.value):
            names.add(node.value)
    return names


def instructor_modules(path: Path) -> set[str]:
    return {name for name in named_modules(path) if name == "course" or name.startswith("course.")}


@pytest.mark.parametrize("module", KERNEL_MODULES)
def test_the_kernel_package_never_imports_the_instructors(module):
    found = instructor_modules(PACKAGE / module)
    assert not found, (f"autograder/{module} imports {sorted(found)}: it runs in students' kernels, which "
                       f"have no `course` / 它在学生的内核中运行，那里没有 `course`")


def test_the_check_reads_the_checks_subpackage_too():
    assert "checks/core.py" in KERNEL_MODULES and "verdict.py" in KERNEL_MODULES


def test_the_check_sees_an_import_of_the_instructors_package(tmp_path):
    """It is not blind to the imports it refuses: absolute, relative from above, and named in a string."""
    for line in ("from course.kernels import sandbox", "import course", "x = 'course.plugins.autograde'"):
        (tmp_path / "shim.py").write_text(line + "\n", "utf-8")
        assert instructor_modules(tmp_path / "shim.py"), line


@pytest.mark.parametrize("old", OLD_CONFIGURATION)
def test_an_old_configurations_name_stops_with_the_new_one(old):
    new = import_item(OLD_CONFIGURATION[old])  # what it names now exists
    module = old.rpartition(".")[0]
    assert module in autograder.MOVED and OLD_CONFIGURATION[old].rpartition(".")[0] in autograder.MOVED[module]
    sys.modules.pop(module, None)
    with pytest.raises(SystemExit) as stopped:
        import_item(old)
    assert shows(str(stopped.value.code), "moved_to_course") and module in str(stopped.value.code)
    assert new is import_item(OLD_CONFIGURATION[old])


def test_nbgrader_with_an_old_configuration_stops_instead_of_grading_without_it(tmp_path):
    """nbgrader goes on without a configuration file that raises an error (it logs it): an old copy must
    stop it, or it would grade with nbgrader's own kernel, outside the sandbox."""
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nfrom autograder.sandbox import use_for_nbgrader\n", "utf-8")
    done = subprocess.run([str(BIN / "nbgrader"), "db", "student", "list"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert shows(done.stderr, "moved_to_course") and "course.kernels.manager" in done.stderr, done.stderr
    assert not (tmp_path / "gradebook.db").exists()


@pytest.mark.parametrize("name", [*student_bundle.assignments(), "untrusted", "forgeries"])
def test_the_corpora_are_data_of_the_instructors_package(name):
    assert (Path(classroom.__file__).parent / "corpus" / f"{name}.toml").is_file()
    assert classroom.corpus(name)


def test_a_missing_corpus_says_where_to_run_the_demo(tmp_path, monkeypatch):
    """A shared environment is installed without the corpora (deploy/exchange/install-shared.sh)."""
    monkeypatch.setattr(classroom.resources, "files", lambda package: tmp_path)
    with pytest.raises(FileNotFoundError) as raised:
        classroom.load_corpus("a1_tensor_to")
    assert shows(str(raised.value), "corpus_not_installed")


def test_the_verdict_knows_every_name_the_checks_modules_hold():
    """What a diagnostic may name includes the checks' own names (the verdict shows '…' for any other
    word): those of every module of the package, as when it was one file (`torch`, `Mapping`, …)."""
    from autograder import checks, diagnostics

    modules = [checks, *(importlib.import_module(f"autograder.checks.{p.stem}")
                         for p in Path(checks.__file__).parent.glob("*.py") if p.stem != "__init__")]
    names = {name for module in modules for name in dir(module)}
    assert {"torch", "Mapping", "NormKernelInputs"} <= names <= diagnostics._words("")


def test_the_boundary_never_imports_the_verdict_that_imports_it():
    """One arrow between the verdict's two modules (the code review's A1): the verdict runs the boundary."""
    assert "autograder.boundary" in named_modules(PACKAGE / "verdict.py")
    assert "autograder.verdict" not in named_modules(PACKAGE / "boundary.py")
