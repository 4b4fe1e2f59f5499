"""The two graders a hostile class meets (tests/grading/test_untrusted.py, test_verdict.py), and the one build
of PyTorch `.ci/run` grades each of them under (README, "CI and GPU runners")."""
import pytest

GRADERS = ("nbgrader autograde", "course grade")


def each_grader_under_one_build(under_the_cpu_build: str) -> list:
    """pytest params of a hostile class's `grader` fixture: `under_the_cpu_build` marked `ci_cpu_build_only`,
    the other grader `ci_cuda_build_only`. The two hostile classes name different graders here, so in CI each
    class meets both graders and both builds, and each build grades with both graders; a plain `make test`, with
    no `-m`, runs all four."""
    assert under_the_cpu_build in GRADERS
    return [pytest.param(grader, marks=build_only("cpu" if grader == under_the_cpu_build else "cuda"))
            for grader in GRADERS]


BUILD_MARKS = {"cpu": "ci_cpu_build_only", "cuda": "ci_cuda_build_only"}


def build_only(build: str):
    """The mark of a test .ci/run runs under `build` ("cpu" or "cuda") alone."""
    return getattr(pytest.mark, BUILD_MARKS[build])


# The demo classes (tests/conftest.py's `demo`): .ci/run grades each under one build, two under each, so that the two
# runs stay even; a plain `make test` grades all four. Grading all four under both builds (CPU and CUDA, 2026-12-06)
# gave the same points for every student and the same diagnostic for every test cell, but for one number the
# kernel's own unseeded run drew; what the build changes (PyTorch's own errors, the simulated machines) the unit
# tests, the lessons, every solution's verdict (test_verdict.py) and the slicing attacks check under both builds.
# a1's class is the CPU build's: the build-independent tests (test_parallel, test_postgres, test_formgrader) read it.
DEMO_BUILDS = {"a1_tensor_to": "cpu", "a2_module_to": "cuda", "a3_precision_transfers": "cpu",
               "a4_several_devices": "cuda"}


def under_its_demo_build(assignment: str, *more, test_id=None):
    """A pytest param (assignment first, `more` after it) of a test that reads `assignment`'s demo class, marked to
    run under the build that class is graded under in CI (DEMO_BUILDS)."""
    return pytest.param(assignment, *more, id=test_id, marks=demo_build_mark(assignment))


def runs_under_its_demo_build(marks: set, assignment: str) -> bool:
    """Whether a test with `marks` that reads `assignment`'s demo class runs in CI under that class's build alone: a
    build-independent test runs under the CPU build."""
    builds = {build for build, mark in BUILD_MARKS.items() if mark in marks} | ({"cpu"} if "build_independent" in marks else set())
    return builds == {DEMO_BUILDS[assignment]}


def demo_build_mark(assignment: str):
    """The mark of a test that reads `assignment`'s demo class alone (not parametrised by assignment)."""
    return build_only(DEMO_BUILDS[assignment])
