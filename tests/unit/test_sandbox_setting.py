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
    from course import grade as grade_module
    from course.commands import grade as grade_command

    tmp_path = configured_folder
    (tmp_path / "source" / "a1").mkdir(parents=True)
    monkeypatch.delenv(sandbox.NO_SANDBOX_VARIABLE, raising=False)
    passed = []

    def grade(root, assignment, jobs, config, *args, **kwargs):
        passed.append(config)
        return SimpleNamespace(graded=["ada"], seconds=0.0, unchanged=[], failed={}, logs=tmp_path)

    monkeypatch.setattr(grade_module, "grade", grade)
    monkeypatch.setattr(grade_command, "registered", lambda *a: True)
    monkeypatch.setattr(grade_command, "print_hand_grading", lambda *a: None)
    monkeypatch.setattr(grade_command, "print_late", lambda *a: None)
    assert cli.main(["grade", "a1", "--root", str(tmp_path), "--no-sandbox"]) == 0
    assert not sandbox.enabled(passed[0])
    assert sandbox.NO_SANDBOX_VARIABLE not in os.environ
    monkeypatch.setattr(sandbox, "problem", lambda: None)  # as on a machine where the sandbox starts
    assert cli.main(["grade", "a1", "--root", str(tmp_path)]) == 0
    assert sandbox.enabled(passed[1])
