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
    return [pytest.param(grader, marks=pytest.mark.ci_cpu_build_only if grader == under_the_cpu_build
                         else pytest.mark.ci_cuda_build_only) for grader in GRADERS]
