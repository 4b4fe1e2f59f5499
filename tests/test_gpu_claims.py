"""The script of the lessons' CUDA-only claims (tests/gpu_claims.py) runs what it can and fails loudly."""
import subprocess
import sys

import pytest
import torch

from autograder.classroom import ROOT

pytestmark = pytest.mark.unit  # `make test-fast`

sys.path.insert(0, str(ROOT / "tests"))
import gpu_claims  # noqa: E402


def run_script(**env) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, str(ROOT / "tests" / "gpu_claims.py")], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **env})


def test_every_claim_names_its_lesson_and_what_it_needs():
    assert len(gpu_claims.CLAIMS) >= 10
    for item in gpu_claims.CLAIMS:
        assert item.lesson[0].isdigit() and item.says and item.needs in ("cuda", "2 cuda", "cuda-build")


def test_the_script_checks_what_this_machine_can_and_passes():
    done = run_script(COURSE_REQUIRE_CUDA="")
    assert done.returncode == 0, done.stdout
    runnable = [c for c in gpu_claims.CLAIMS if c.runnable()]
    assert f"{len(runnable)} passed, 0 failed" in done.stdout
    if torch.version.cuda is not None:  # the CUDA-build runner checks the build-only claims
        assert runnable


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here: the requirement is met")
def test_requiring_cuda_without_cuda_fails():
    done = run_script(COURSE_REQUIRE_CUDA="1")
    assert done.returncode == 1 and "no claim was checked" in done.stdout


def test_a_contradiction_fails_the_script(monkeypatch, capsys):
    wrong = gpu_claims.Claim("0 · test", "a claim that does not hold", "cuda-build", lambda: (False, "seen"))
    crashing = gpu_claims.Claim("0 · test", "a claim whose check crashes", "cuda-build", lambda: 1 / 0)
    monkeypatch.setattr(gpu_claims, "CLAIMS", [wrong, crashing])
    monkeypatch.setattr(gpu_claims.Claim, "runnable", lambda self: True)
    monkeypatch.delenv("COURSE_REQUIRE_CUDA", raising=False)
    assert gpu_claims.main() == 1
    shown = capsys.readouterr().out
    assert shown.count("CONTRADICTION") == 2 and "ZeroDivisionError" in shown and "0 passed, 2 failed" in shown
