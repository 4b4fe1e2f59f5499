"""The layout (issue 24): `autograder` is what runs in a student's or a grading kernel and never imports the
instructor's `course` package; the module paths that moved to `course` still work for an old configuration."""
import ast
import importlib
import re
from pathlib import Path

import pytest
from traitlets.utils.importstring import import_item

from course import classroom
from course.authoring import student_bundle
from support.messages import shows

PACKAGE = student_bundle.ROOT / "autograder"
KERNEL_MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in student_bundle.MOVED)
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
    found = instructor_modules(PACKAGE / f"{module}.py")
    assert not found, (f"autograder/{module}.py imports {sorted(found)}: it runs in students' kernels, which "
                       f"have no `course` / 它在学生的内核中运行，那里没有 `course`")


@pytest.mark.parametrize("module", student_bundle.MOVED)
def test_the_check_sees_an_import_of_the_instructors_package(module):
    """The moved modules' re-exports are the imports the check above refuses: it is not blind to them."""
    assert instructor_modules(PACKAGE / f"{module}.py")


@pytest.mark.parametrize("old", OLD_CONFIGURATION)
def test_an_old_configurations_name_is_what_moved(old):
    assert import_item(old) is import_item(OLD_CONFIGURATION[old])


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
    from autograder import checks, verdict

    modules = [checks, *(importlib.import_module(f"autograder.checks.{p.stem}")
                         for p in Path(checks.__file__).parent.glob("*.py") if p.stem != "__init__")]
    names = {name for module in modules for name in dir(module)}
    assert {"torch", "Mapping", "NormKernelInputs"} <= names <= verdict._words("")


def test_the_boundary_never_imports_the_verdict_that_imports_it():
    """One arrow between the verdict's two modules (the code review's A1): the verdict runs the boundary."""
    assert "autograder.boundary" in named_modules(PACKAGE / "verdict.py")
    assert "autograder.verdict" not in named_modules(PACKAGE / "boundary.py")
