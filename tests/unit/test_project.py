"""The set-up promises of the README hold."""
import os
import re
import tomllib

import pytest
import yaml

from autograder.devices import cuda_required
from course.classroom import ROOT
from support.graders import DEMO_BUILDS, runs_under_its_demo_build

import torch


def requirement_name(spec: str) -> str:
    return re.split(r"[<>=!~\[ ;]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_names_every_runtime_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    wanted = {requirement_name(s) for s in project["dependencies"] + project["optional-dependencies"]["test"]}
    environment = yaml.safe_load((ROOT / "environment.yml").read_text("utf-8"))
    pip = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    listed = {requirement_name(s) for s in pip if not s.startswith("-")}
    assert wanted <= listed, f"missing from environment.yml: {sorted(wanted - listed)}"
    assert "python=3.11" in environment["dependencies"] and "-e ." in pip


def test_ci_runs_the_readme_test_command_under_both_builds():
    script = (ROOT / ".ci" / "run").read_text()
    runs = re.findall(r"^make test( TORCH_BUILD=cuda)?(?: PYTEST_ARGS=(.*))? > ", script, flags=re.MULTILINE)
    left_out = {build.strip() or "cpu": set(re.findall(r"not (\w+)", args)) for build, args in runs}
    assert left_out == {"cpu": {"ci_cuda_build_only"},
                        "TORCH_BUILD=cuda": {"build_independent", "ci_cpu_build_only"}}
    # each run leaves out only markers pytest knows, and nothing is left out of both
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["pytest"]["ini_options"]["markers"]
    for marker in set.union(*left_out.values()):
        assert any(known.startswith(f"{marker}:") for known in markers), marker
    assert not set.intersection(*left_out.values())
    assert "exit $status" in script  # either run failing fails CI
    readme = (ROOT / "README.md").read_text("utf-8")
    assert readme.count("`make test`") >= 2 and readme.count("`make demo`") >= 2


@pytest.mark.parametrize("marks, assignment, runs", [
    ({"ci_cpu_build_only"}, "a1_tensor_to", True),
    ({"ci_cuda_build_only"}, "a2_module_to", True),
    ({"build_independent"}, "a1_tensor_to", True),  # as test_parallel reads it: under the CPU build
    ({"ci_cuda_build_only"}, "a1_tensor_to", False),  # would grade a1's class again under the CUDA build
    ({"build_independent"}, "a4_several_devices", False),
    (set(), "a3_precision_transfers", False),  # under both builds
    ({"ci_cpu_build_only", "ci_cuda_build_only"}, "a3_precision_transfers", False),  # under neither
    ({"build_independent", "ci_cuda_build_only"}, "a2_module_to", False),  # under neither
])
def test_a_test_that_reads_a_demo_class_runs_under_its_build_only(marks, assignment, runs):
    assert runs_under_its_demo_build(marks, assignment) is runs


def test_each_build_grades_two_demo_classes():
    assert sorted(DEMO_BUILDS) == sorted(path.name for path in (ROOT / "source").iterdir() if path.is_dir())
    assert sorted(DEMO_BUILDS.values()) == ["cpu", "cpu", "cuda", "cuda"]


def test_readme_is_in_both_languages():
    readme = (ROOT / "README.md").read_text("utf-8")
    assert "## English" in readme and "## 简体中文" in readme


def test_runs_under_the_torch_build_that_make_installed():
    """`make test` (CPU build) and `make test TORCH_BUILD=cuda` (PyPI's CUDA build): never a silent fallback."""
    build = os.environ.get("COURSE_TORCH_BUILD")
    if build is None:
        pytest.skip("not run through make: no TORCH_BUILD to check")
    assert build in ("cpu", "cuda")
    assert (torch.version.cuda is not None) == (build == "cuda"), torch.__version__
    if build == "cuda" and not torch.cuda.is_available():
        # the students' usual machine: the build names CUDA, the runtime check finds none
        assert torch.accelerator.current_accelerator() == torch.device("cuda")
        assert torch.accelerator.current_accelerator(check_available=True) is None


def test_gpu_job_really_has_cuda():
    """Under COURSE_REQUIRE_CUDA=1 (the GPU CI job) the suite must be running with CUDA; on every job the
    graders check on CUDA exactly when it is really there (a CUDA build without a GPU: not)."""
    from autograder import grading_devices

    if cuda_required():
        assert torch.cuda.is_available()
    assert (torch.device("cuda", 0) in grading_devices()) == torch.cuda.is_available(), grading_devices()


def test_readme_seed_table_points_at_sections_that_exist():
    from support.lessons import english_headings

    readme = (ROOT / "README.md").read_text("utf-8")
    table = readme.split("### What the seed articles say")[1].split("###")[0]
    references = re.findall(r'lesson (\d+)((?: § "[^"]+",?)*)', table)
    assert len(references) >= 15
    for number, sections in references:
        (path,) = ROOT.glob(f"notebooks/{int(number):02d}_*.ipynb")
        headings = english_headings(path)
        for section in re.findall(r'"([^"]+)"', sections):
            assert any(h.startswith(section) for h in headings), f"lesson {number} has no section {section!r}"
    assert "{{EJS4}}" in table and "{{EJS6}}" in table


def test_a_missing_system_tool_fails_the_test_unless_skipped_on_purpose(monkeypatch):
    from support import system_tools

    monkeypatch.delenv("COURSE_SKIP_EXAMPLE", raising=False)
    with pytest.raises(pytest.fail.Exception, match="make example"):
        system_tools.missing("example", "make example", "COURSE_SKIP_EXAMPLE")
    monkeypatch.setenv("COURSE_SKIP_EXAMPLE", "1")
    with pytest.raises(pytest.skip.Exception, match="COURSE_SKIP_EXAMPLE=1"):
        system_tools.missing("example", "make example", "COURSE_SKIP_EXAMPLE")


# variables the tests set for their own processes (canaries, probes), not settings of the course
TEST_INTERNAL_VARIABLES = {"COURSE_GRADER_CANARY", "COURSE_SANDBOX_CANARY", "COURSE_PROBE", "COURSE_SKIP_EXAMPLE"}


def test_every_environment_variable_the_course_reads_is_in_the_readme_table():
    """One table in each language names every COURSE_* variable that the code, the configuration, the
    Makefile, CI and the tests read (quoted, or expanded by the shell), and nothing else."""
    files = [ROOT / "nbgrader_config.py", ROOT / "Makefile", ROOT / ".ci" / "run",
             *(ROOT / "autograder").glob("*.py"), *(ROOT / "course").rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(p for p in (ROOT / "deploy").rglob("*") if p.is_file())]
    pattern = re.compile(r"[\"'](COURSE_[A-Z_]+)[\"']|\$\$?\{?(COURSE_[A-Z_]+)")
    read = {name for path in files for pair in pattern.findall(path.read_text("utf-8", errors="replace"))
            for name in pair if name}
    read -= TEST_INTERNAL_VARIABLES
    readme = (ROOT / "README.md").read_text("utf-8")
    for heading in ("### Environment variables", "### 环境变量"):
        table = readme.split(heading, 1)[1].split("###", 1)[0]
        listed = set(re.findall(r"`(COURSE_[A-Z_]+)`", table))
        assert listed == read, f"{heading}: not listed / 未列出 {sorted(read - listed)}, not read / 未读取 {sorted(listed - read)}"


def test_make_clean_removes_only_what_make_built(tmp_path):
    """A course folder holds the class (gradebook.db, submissions, autograded notebooks, feedback, logs):
    `make clean` there must never delete them, only build/ (issue 43: it once removed all of them)."""
    import shutil
    import subprocess

    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    kept = ["gradebook.db", "roster.csv", "submitted/ann/a1/a1.ipynb", "autograded/ann/a1/a1.ipynb",
            "feedback/ann/a1/a1.html", "logs/a1/ann.log", "insights/a1.html", "release/a1/a1.ipynb"]
    for name in kept + ["build/demo/x"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    done = subprocess.run(["make", "--no-print-directory", "clean"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (tmp_path / "build").exists()
    assert [name for name in kept if not (tmp_path / name).exists()] == []
