"""Whether grading is sandboxed is one setting, `Sandbox.enabled`, passed down in the Config: read from
COURSE_NO_SANDBOX by nbgrader_config.py for plain nbgrader, set by `course grade --no-sandbox`."""
import os

import pytest
from traitlets.config import Config

from course import classroom
from course.kernels import sandbox


@pytest.fixture
def configured_folder(tmp_path):
    """A folder holding only this repository's nbgrader_config.py."""
    (tmp_path / "nbgrader_config.py").write_text((classroom.ROOT / "nbgrader_config.py").read_text("utf-8"))
    return tmp_path


@pytest.mark.parametrize("variable, on", [(None, True), ("0", True), ("1", False)])
def test_the_course_config_turns_the_sandbox_off_only_when_told(configured_folder, monkeypatch, variable, on):
    """COURSE_NO_SANDBOX is read once, by nbgrader_config.py, into the one setting every grader reads."""
    from course import settings

    tmp_path = configured_folder
    if variable is None:
        monkeypatch.delenv(sandbox.NO_SANDBOX_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(sandbox.NO_SANDBOX_VARIABLE, variable)
    assert sandbox.enabled(settings.load(tmp_path)) is on
    assert sandbox.enabled() and sandbox.enabled(Config())  # no setting: sandboxed


def test_course_grade_no_sandbox_passes_the_setting_down_not_through_the_environment(configured_folder, monkeypatch):
    from types import SimpleNamespace

    from course import cli
    from course import gradebook, grading

    tmp_path = configured_folder
    (tmp_path / "source" / "a1").mkdir(parents=True)
    monkeypatch.delenv(sandbox.NO_SANDBOX_VARIABLE, raising=False)
    passed = []

    def grade(root, assignment, jobs, config, *args, **kwargs):
        passed.append(config)
        return SimpleNamespace(graded=["ada"], seconds=0.0, unchanged=[], failed={}, logs=tmp_path)

    monkeypatch.setattr(grading, "grade", grade)
    monkeypatch.setattr(gradebook, "registered", lambda *a: True)
    monkeypatch.setattr(gradebook, "print_hand_grading", lambda *a: None)
    monkeypatch.setattr(gradebook, "print_late", lambda *a: None)
    assert cli.main(["grade", "a1", "--root", str(tmp_path), "--no-sandbox"]) == 0
    assert not sandbox.enabled(passed[0])
    assert sandbox.NO_SANDBOX_VARIABLE not in os.environ
    monkeypatch.setattr(sandbox, "problem", lambda: None)  # as on a machine where the sandbox starts
    assert cli.main(["grade", "a1", "--root", str(tmp_path)]) == 0
    assert sandbox.enabled(passed[1])


def test_a_kernel_sees_the_package_folders_a_pth_file_adds_but_never_a_repository(tmp_path):
    """`make gpu-check`'s environment reaches the machine's own PyTorch through a .pth file naming that
    environment's site-packages: a sandboxed kernel needs it read-only. An editable install's .pth names
    the repository (source/, hidden tests): that stays out."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    machine = tmp_path / "machine" / "lib" / "python3.12" / "dist-packages"
    repository = tmp_path / "repository"
    for folder in (site, machine, repository):
        folder.mkdir(parents=True)
    (site / "machine-torch.pth").write_text(f"{machine}\n", "utf-8")
    (site / "__editable__.torch_to_course-0.1.0.pth").write_text(f"{repository}\n", "utf-8")
    (site / "distutils-precedence.pth").write_text("import os; var = 'SETUPTOOLS_USE_DISTUTILS'\n", "utf-8")
    (site / "gone.pth").write_text(f"{tmp_path / 'nowhere' / 'site-packages'}\n", "utf-8")
    assert sandbox.site_packages_added_by_pth_files([site]) == [str(machine)]
