"""Every limit and switch of grading is one traitlets setting of the class that uses it, set in nbgrader_config.py
and passed down in the Config; the environment variables that stay override a setting, read in one place
(course.settings.from_environment). Whether grading is sandboxed is `Sandbox.enabled`: COURSE_NO_SANDBOX for
plain nbgrader, `course grade --no-sandbox`."""
import os
import shutil

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
    monkeypatch.setattr(sandbox, "problem", lambda config=None: None)  # as on a machine where the sandbox starts
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


def test_the_environment_overrides_settings_in_one_place(configured_folder, monkeypatch):
    """COURSE_BWRAP, COURSE_DB_URL and COURSE_NO_SANDBOX become settings when nbgrader_config.py is loaded, and
    only the variables that are set: the settings' own defaults otherwise."""
    from course import settings

    for variable in settings.OVERRIDES:
        monkeypatch.delenv(variable, raising=False)
    plain = settings.load(configured_folder)
    assert sandbox.Sandbox(config=plain).bwrap == (shutil.which("bwrap") or "")
    assert plain.CourseDirectory.db_url.startswith(f"sqlite:///{configured_folder}")
    monkeypatch.setenv("COURSE_BWRAP", "/opt/bwrap/bin/bwrap")
    monkeypatch.setenv("COURSE_DB_URL", "postgresql+psycopg://grader@db/gradebook")
    monkeypatch.setenv("COURSE_NO_SANDBOX", "1")
    overridden = settings.load(configured_folder)
    assert sandbox.Sandbox(config=overridden).bwrap == "/opt/bwrap/bin/bwrap"
    assert overridden.CourseDirectory.db_url == "postgresql+psycopg://grader@db/gradebook"
    assert not sandbox.enabled(overridden)


def test_a_sandboxs_bounds_come_from_its_settings(tmp_path):
    """The bwrap command line of a sandbox, built from `c.Sandbox....` (nothing read from module globals)."""
    config = Config()
    config.Sandbox.bwrap, config.Sandbox.tmp_bytes, config.Sandbox.shm_bytes = "/bin/true", 3 * 2**20, 5 * 2**20
    box = object.__new__(sandbox.KernelSandbox)  # its command line only: no bwrap runs
    box.settings, box.work_dir, box.private = sandbox.Sandbox(config=config), str(tmp_path), tmp_path
    box.connection_file, box.run_dir = str(tmp_path / "kernel.json"), tmp_path / "run"
    arguments = box.arguments({}, ["/bin/true"], info_fd=9)
    assert arguments[0] == "/bin/true"
    assert arguments[arguments.index("/tmp") - 3:arguments.index("/tmp")] == ["--size", str(3 * 2**20), "--tmpfs"]
    assert arguments[arguments.index("/dev/shm") - 3:arguments.index("/dev/shm")] == ["--size", str(5 * 2**20), "--tmpfs"]


def test_each_grading_kernel_gets_the_configured_limits():
    """GradingKernelManager adds the kernel's start (autograder.kernel.start_kernel) with its settings to every
    kernel it starts; the verdict's limits follow them unless set apart, and its cell limit is the kernel's."""
    import asyncio

    from course.kernels.manager import GradingKernelManager
    from course.plugins.autograde import DecideGrades

    config = Config()
    config.GradingKernelManager.memory_bytes, config.GradingKernelManager.cpu_seconds = 2**30, 42
    config.Execute.timeout = 17
    manager = GradingKernelManager(config=config)

    class Stop(Exception):
        pass

    async def launched(**kw):
        raise Stop(kw["extra_arguments"])

    manager.provisioner = type("Provisioner", (), {"pre_launch": staticmethod(launched)})()
    with pytest.raises(Stop) as stopped:
        asyncio.run(manager._async_pre_start_kernel(extra_arguments=["--existing"]))
    arguments = stopped.value.args[0]
    assert arguments[0] == "--existing" and len(arguments) == 2
    assert "memory_bytes=1073741824" in arguments[1] and "cpu_seconds=42" in arguments[1]
    assert DecideGrades(config=config).limits() == {"memory_bytes": 2**30, "cpu_seconds": 42}
    assert DecideGrades(config=config).cell_timeout() == 17
    config.DecideGrades.cpu_seconds = 7
    assert DecideGrades(config=config).limits()["cpu_seconds"] == 7


def test_every_limit_is_documented_by_help_all(capsys):
    """`course grade --help-all` (traitlets' own documentation of the settings, as nbgrader's `--help-all`) names
    each limit with its default."""
    from course import cli

    with pytest.raises(SystemExit):
        cli.main(["grade", "--help-all"])
    shown = capsys.readouterr().out
    for setting in ["Sandbox.enabled", "Sandbox.memory_bytes", "Sandbox.processes", "Sandbox.tmp_bytes",
                    "Sandbox.shm_bytes", "Sandbox.bwrap", "GradingKernelManager.memory_bytes",
                    "GradingKernelManager.cpu_seconds", "GradingKernelManager.fork_server", "SafeExecute.timeout",
                    "SafeExecute.notebook_timeout", "SafeExecute.grading_timeout", "DecideGrades.timeout",
                    "DecideGrades.memory_bytes", "DecideGrades.cpu_seconds"]:
        assert f"--{setting}=" in shown, setting
    assert "Default: 6442450944" in shown and "Default: 512" in shown


def test_an_older_config_that_passes_limits_to_use_for_nbgrader_still_loads_and_says_the_fix(caplog):
    """An nbgrader_config.py copied before the limits became settings still loads (an error would stop the file
    before its pipelines, and nbgrader would grade with its own, unsandboxed ones), and the log says the fix."""
    import logging

    from support.messages import shows
    from course.kernels.manager import use_for_nbgrader

    with caplog.at_level(logging.WARNING):
        use_for_nbgrader(group_memory_bytes=6 * 2**30, group_processes=512)
    assert shows(caplog.text, "sandbox_limits_moved") and "c.Sandbox.memory_bytes" in caplog.text
