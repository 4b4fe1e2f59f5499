"""`make gpu-check` (tests/gpu_check.py): what it decides without a GPU. It finds the machine's PyTorch and
refuses one older than the course's minimum, installs the course without ever replacing it, skips every GPU
check on a machine without one, and reports one table and a JSON file, failing on a contradiction."""
import json
import re
import stat
import subprocess
import sys
import tomllib

import pytest
import torch

from course.classroom import ROOT

sys.path.insert(0, str(ROOT / "tests"))
import gpu_check  # noqa: E402
import gpu_claims  # noqa: E402

NO_GPU = gpu_check.Torch(version="2.13.0+cpu", distribution="2.13.0+cpu", cuda=None, gpus=0, site="/somewhere", python="3.11.9",
                         executable=sys.executable)


def fake_python(tmp_path, prints: str | None):
    """An interpreter whose `-c PROBE` prints `prints` (a torch it claims to have), or fails like a Python
    without torch (None)."""
    path = tmp_path / "python"
    body = f"cat <<'JSON'\n{prints}\nJSON\n" if prints is not None else "echo 'No module named torch' >&2; exit 1\n"
    path.write_text(f"#!/bin/sh\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_finds_the_torch_of_the_python_it_is_given():
    import importlib.metadata

    found = gpu_check.find_torch(sys.executable)
    assert found.version == torch.__version__ and found.cuda == torch.version.cuda
    assert found.distribution == importlib.metadata.version("torch")  # what pip's constraint must name
    assert found.gpus == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    assert (gpu_check.Path(found.site) / "torch" / "__init__.py").exists()


def test_the_course_minimum_pin_and_python_are_read_from_the_project():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    course = gpu_check.course_torch()
    assert f"torch>={course.minimum}" in project["dependencies"]
    assert project["requires-python"].startswith(f">={course.python}")
    assert f"torch=={course.pin}" in (ROOT / "Makefile").read_text("utf-8")


@pytest.mark.parametrize("version, release", [("2.11.0+cu130", (2, 11, 0)), ("2.6.0a0+ecf3bae40a.nv25.01", (2, 6, 0)),
                                              ("2.13.0", (2, 13, 0)), ("3.12.3", (3, 12, 3))])
def test_release_reads_the_numbers_of_any_build(version, release):
    assert gpu_check.release(version) == release


def test_a_python_without_torch_is_refused(tmp_path, capsys):
    python = fake_python(tmp_path, None)
    assert gpu_check.find_torch(python) is None
    assert gpu_check.main(["--python", python, "--out", str(tmp_path / "out")]) == 2
    shown = capsys.readouterr().out
    assert "cannot import torch" in shown and "无法导入 torch" in shown
    assert not (tmp_path / "out" / "venv").exists()


@pytest.mark.parametrize("version, python, refused", [("2.10.0+cu128", "3.11.9", "Python 3.11.9 torch 2.10.0+cu128 is older than the course's minimum, 2.11"),
                                                      ("2.11.0+cu130", "3.10.12", "Python 3.10.12 is older than the course's minimum, 3.11"),
                                                      ("2.11.0+cu130", "3.12.3", None),
                                                      ("2.11.0", "3.11.0", None)])
def test_refuses_below_the_course_minimum(tmp_path, capsys, monkeypatch, version, python, refused):
    monkeypatch.delenv("COURSE_REQUIRE_CUDA", raising=False)
    claimed = json.dumps({**gpu_check.asdict(NO_GPU), "version": version, "python": python})
    built = []
    monkeypatch.setattr(gpu_check, "build_environment", lambda *args: built.append(args) or "stopped here")
    status = gpu_check.main(["--python", fake_python(tmp_path, claimed), "--out", str(tmp_path / "out")])
    shown = capsys.readouterr().out
    if refused:
        assert status == 2 and not built and refused.split(" ", 2)[-1] in shown and "不运行检查" in shown
    else:
        assert built and f"torch {version}" in shown and "course pins torch 2.13.0" in shown
        assert ("is not the pinned 2.13.0" in shown) == (version != "2.13.0")


@pytest.mark.parametrize("required", ["1", "2"])
def test_a_gpu_job_without_a_gpu_is_refused_not_skipped_through(tmp_path, capsys, monkeypatch, required):
    monkeypatch.setenv("COURSE_REQUIRE_CUDA", required)
    monkeypatch.setattr(gpu_check, "build_environment", lambda *args: pytest.fail("built an environment"))
    python = fake_python(tmp_path, json.dumps(gpu_check.asdict(NO_GPU)))
    assert gpu_check.main(["--python", python, "--out", str(tmp_path / "out")]) == 2
    assert "COURSE_REQUIRE_CUDA=1 is set, but CUDA is not available" in capsys.readouterr().out


def test_the_course_is_installed_under_a_constraint_that_keeps_the_machines_torch(tmp_path):
    """Its dependencies as pip resolves them for this Python, torch held to the version found; the course
    itself without dependencies, so that its Python pin (3.11) cannot make pip pick versions for another."""
    venv = tmp_path / "venv"
    dependencies, course = gpu_check.install_commands(venv, NO_GPU, None)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install"]
    assert dependencies[:4] == course[:4] == pip
    assert dependencies[dependencies.index("--constraint") + 1] == str(venv / "torch-constraint.txt")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert set(project["dependencies"] + project["optional-dependencies"]["test"]) <= set(dependencies)
    assert "--ignore-requires-python" not in dependencies
    assert course[-2:] == ["-e", str(ROOT)] and "--no-deps" in course and "--ignore-requires-python" in course
    assert not any("--no-index" in command for command in (dependencies, course))
    for offline in gpu_check.install_commands(venv, NO_GPU, tmp_path / "wheels"):
        assert offline[offline.index("--no-index"):][:3] == ["--no-index", "--find-links", str(tmp_path / "wheels")]


def test_without_a_gpu_every_gpu_check_says_so_and_runs_nothing(tmp_path):
    for check in gpu_check.CHECKS:
        if check.needs_gpu:
            ran = gpu_check.run_check(check, NO_GPU, "/no/such/python", {}, tmp_path)
            assert (ran.result, ran.seen) == ("skipped", "skipped: no CUDA GPU / 跳过：没有 CUDA GPU"), check.name
    assert not list(tmp_path.iterdir())
    assert [c.name for c in gpu_check.CHECKS if not c.needs_gpu] == ["a kernel bounded as a whole"]


def test_every_check_the_issue_lists_is_there_and_every_path_it_runs_exists():
    commands = [" ".join(check.command) for check in gpu_check.CHECKS]
    assert any("tests/gpu_claims.py" in c for c in commands)
    assert any(c.endswith(" notebooks") for c in commands) and any(c.endswith(" source") for c in commands)
    assert all(any(f"test_grading.py -k {a}" in c for c in commands) for a in gpu_check.ASSIGNMENTS)
    assert any("test_boundary.py" in c for c in commands)
    graded = {c.name: c for c in gpu_check.CHECKS if c.name.startswith("course grade: ")}
    for a in gpu_check.ASSIGNMENTS:
        report, grade, again = [" ".join(command) for command in (graded[f"course grade: {a}"].command, *graded[f"course grade: {a}"].then)]
        assert f"course.cli report --root {{out}}/classes/{a} --assignment {a}" in report and again == f"{report} --reuse"
        assert f"course.cli grade {a} --root {{out}}/classes/{a} --force --jobs" in grade
    for command in commands:
        for path in re.findall(r"(?:tests|notebooks|source)[\w/.]*", command):
            assert (ROOT / path).exists(), path


def python_printing(output: str, status: int = 0) -> tuple[str, ...]:
    return ("python", "-c", f"import sys; print({output!r}); sys.exit({status})")


@pytest.mark.parametrize("output, status, result, seen", [
    ("== 12 passed, 2 skipped in 3.10s ==", 0, "ok", "12 passed, 2 skipped"),
    ("== 281 passed, 1 failed in 500.12s (0:08:20) ==", 1, "contradiction", "281 passed, 1 failed"),
    ("== 5 deselected in 0.50s ==", 5, "contradiction", "5 deselected"),
    ("INTERNALERROR> boom", 3, "contradiction", "no summary (see its log)"),
])
def test_a_pytest_check_reads_pytests_counts(tmp_path, output, status, result, seen):
    check = gpu_check.Check("x", "gpu_check_expect_nbval", python_printing(output, status), needs_gpu=False,
                            judge=gpu_check.pytest_summary)
    row = gpu_check.run_check(check, NO_GPU, sys.executable, {}, tmp_path)
    assert (row.result, row.seen) == (result, seen)
    assert output in (tmp_path / "x.log").read_text()


@pytest.mark.parametrize("output, status, result", [
    ("44 passed, 0 failed, 6 not checked on this machine", 0, "ok"),
    ("43 passed, 0 failed, 6 not checked on this machine, 1 differ only with the torch version", 0, "version"),
    ("43 passed, 1 failed, 6 not checked on this machine", 1, "contradiction"),
    ("COURSE_REQUIRE_CUDA=2 but this machine has 1 CUDA GPU(s): no claim was checked.", 1, "contradiction"),
])
def test_the_claims_check_reads_the_scripts_count(output, status, result):
    assert gpu_check.claims_summary(status, output)[0] == result


def test_a_check_that_runs_too_long_is_a_contradiction(tmp_path):
    check = gpu_check.Check("slow", "gpu_check_expect_nbval", ("python", "-c", "import time; time.sleep(30)"),
                            needs_gpu=False, judge=gpu_check.pytest_summary)
    row = gpu_check.run_check(check, NO_GPU, sys.executable, {}, tmp_path, timeout=1)
    assert row.result == "contradiction" and row.seen == "timed out after 1 s"


def test_a_check_whose_precondition_fails_is_skipped_with_the_reason(tmp_path):
    check = gpu_check.Check("bounded", "gpu_check_expect_bounded", python_printing("never run"), needs_gpu=False,
                            judge=gpu_check.pytest_summary, precondition="print('no cgroup v2 delegation here')")
    row = gpu_check.run_check(check, NO_GPU, sys.executable, {}, tmp_path)
    assert (row.result, row.seen) == ("skipped", "no cgroup v2 delegation here") and not list(tmp_path.iterdir())


@pytest.mark.parametrize("fails", [False, True])
def test_one_table_and_a_json_file_and_a_contradiction_fails_the_run(tmp_path, capsys, monkeypatch, fails):
    monkeypatch.delenv("COURSE_REQUIRE_CUDA", raising=False)
    checks = (gpu_check.Check("passes", "gpu_check_expect_nbval", python_printing("3 passed in 0.1s"),
                              needs_gpu=False, judge=gpu_check.pytest_summary),
              gpu_check.Check("needs a gpu", "gpu_check_expect_claims", python_printing("never run"),
                              judge=gpu_check.claims_summary),
              gpu_check.Check("fails", "gpu_check_expect_boundary",
                              python_printing("1 passed, 1 failed in 0.1s" if fails else "2 passed in 0.1s", int(fails)),
                              needs_gpu=False, judge=gpu_check.pytest_summary))
    monkeypatch.setattr(gpu_check, "CHECKS", checks)
    monkeypatch.setattr(gpu_check, "find_torch", lambda python: NO_GPU)
    monkeypatch.setattr(gpu_check, "build_environment", lambda *args: None)
    monkeypatch.setattr(gpu_check, "environment", lambda venv, found: {})
    out = tmp_path / "out"
    (out / "venv" / "bin").mkdir(parents=True)
    (out / "venv" / "bin" / "python").symlink_to(sys.executable)  # the course's environment: this one
    status = gpu_check.main(["--out", str(out), "--jobs", "3", "--python", sys.executable])
    shown = capsys.readouterr().out
    report = json.loads((out / "gpu-check.json").read_text("utf-8"))
    assert status == (1 if fails else 0) and report["contradictions"] == int(fails)
    assert [row["check"] for row in report["checks"]] == ["passes", "needs a gpu", "fails"]
    assert [row["result"] for row in report["checks"]] == ["ok", "skipped", "contradiction" if fails else "ok"]
    assert report["torch"]["version"] == "2.13.0+cpu" and report["course"]["pin"] == "2.13.0"
    assert "| check | expected | seen | result |" in shown
    assert "| needs a gpu | every lesson runs top to bottom on the GPU and every CUDA claim holds / " in shown
    assert "skipped: no CUDA GPU / 跳过：没有 CUDA GPU | skipped / 跳过 |" in shown
    assert ("| fails | " in shown) and (("CONTRADICTION / 矛盾" in shown) == fails)


def test_a_wording_claim_on_another_torch_is_a_version_difference_not_a_contradiction(monkeypatch, capsys):
    worded = gpu_claims.Claim("0 · test", "PyTorch's words", "cuda-build", lambda: (False, "other words"), wording=True)
    monkeypatch.setattr(gpu_claims, "CLAIMS", [worded])
    monkeypatch.setattr(gpu_claims.Claim, "runnable", lambda self: True)
    monkeypatch.delenv("COURSE_REQUIRE_CUDA", raising=False)
    monkeypatch.setattr(gpu_claims, "other_version_than_the_pin", lambda: "2.13.0")
    assert gpu_claims.main() == 0
    shown = capsys.readouterr().out
    assert "0 passed, 0 failed, 0 not checked on this machine, 1 differ only with the torch version" in shown
    assert gpu_check.claims_summary(0, shown)[0] == "version"
    monkeypatch.setattr(gpu_claims, "other_version_than_the_pin", lambda: None)  # the pinned torch: a contradiction
    assert gpu_claims.main() == 1 and "CONTRADICTION" in capsys.readouterr().out
    crashing = gpu_claims.Claim("0 · test", "PyTorch's words", "cuda-build", lambda: 1 / 0, wording=True)
    monkeypatch.setattr(gpu_claims, "CLAIMS", [crashing])
    monkeypatch.setattr(gpu_claims, "other_version_than_the_pin", lambda: "2.13.0")
    assert gpu_claims.main() == 1 and "CONTRADICTION" in capsys.readouterr().out  # a crash is never wording


def test_a_wording_claim_compares_nothing_but_wording():
    """Another torch may word an error otherwise, and only that is forgiven: each claim marked `wording`
    judges one message, the behaviour around it has a claim of its own."""
    worded = {c.check.__name__ for c in gpu_claims.CLAIMS if c.wording}
    assert worded == {"bce_refusal_wording", "layer_norm_refusal_wording", "layer_norm_refusal_wording_bfloat16",
                      "linear_mismatch_message",
                      "elementwise_mismatch_message"}


@pytest.mark.parametrize("asked, required", [(None, "1"), ("2", "2")])
def test_with_a_gpu_the_checks_run_with_cuda_required_in_the_course_environment(tmp_path, monkeypatch, asked, required):
    """The GPU path, without a GPU: a torch that sees one makes every check run (none skipped), with CUDA
    required (2 kept where the job asks for two GPUs), the CUDA build asserted and the venv's commands first."""
    if asked is None:
        monkeypatch.delenv("COURSE_REQUIRE_CUDA", raising=False)
    else:
        monkeypatch.setenv("COURSE_REQUIRE_CUDA", asked)
    one_gpu = gpu_check.Torch(**{**gpu_check.asdict(NO_GPU), "version": "2.11.0+cu130", "cuda": "13.0", "gpus": 1})
    env = gpu_check.environment(tmp_path / "venv", one_gpu)
    assert env["COURSE_REQUIRE_CUDA"] == required and env["COURSE_TORCH_BUILD"] == "cuda"
    assert env["PATH"].split(":")[0] == str(tmp_path / "venv" / "bin")
    shows = "import os; print(os.environ['COURSE_REQUIRE_CUDA'], os.environ['COURSE_TORCH_BUILD'], '1 passed in 0.1s')"
    check = gpu_check.Check("on the gpu", "gpu_check_expect_boundary", ("python", "-c", shows), judge=gpu_check.pytest_summary)
    row = gpu_check.run_check(check, one_gpu, sys.executable, env, tmp_path)
    assert (row.result, row.seen) == ("ok", "1 passed")
    assert (tmp_path / "on-the-gpu.log").read_text().startswith(f"{required} cuda ")


def test_checks_that_time_the_gpu_never_run_side_by_side_and_the_others_do(tmp_path):
    """Lessons 7, 8 and 10 assert timings measured on the GPU: the lessons' two runs take turns, while
    every other check runs beside them."""
    one_gpu = gpu_check.Torch(**{**gpu_check.asdict(NO_GPU), "gpus": 1})
    stamp = "import time; s = time.time(); time.sleep(1); print(s, time.time(), '1 passed in 1s')"
    checks = [gpu_check.Check(name, "gpu_check_expect_nbval", ("python", "-c", stamp), judge=gpu_check.pytest_summary,
                              times_the_gpu=timed) for name, timed in [("a", True), ("b", True), ("c", False)]]
    rows = gpu_check.run_checks(checks, one_gpu, sys.executable, {}, tmp_path, jobs=3)
    assert [row.result for row in rows] == ["ok"] * 3
    spans = {row.check: [float(t) for t in (tmp_path / "logs" / f"{row.check}.log").read_text().split()[:2]] for row in rows}
    (a_start, a_end), (b_start, b_end), (c_start, c_end) = spans["a"], spans["b"], spans["c"]
    assert a_end <= b_start or b_end <= a_start
    assert c_start < max(a_end, b_end) and c_end > min(a_start, b_start)
    assert {c.name for c in gpu_check.CHECKS if c.times_the_gpu} == {"lessons on the GPU + claims", "nbval: lessons"}


def test_the_constraint_names_the_version_pip_knows_the_machines_torch_by(tmp_path, monkeypatch):
    """PyPI's CUDA wheel installs as torch 2.13.0 while torch.__version__ says 2.13.0+cu130: a constraint on
    the latter matches nothing installed, and pip gives up (seen with this project's .venv-cuda)."""
    cuda_wheel = gpu_check.Torch(**{**gpu_check.asdict(NO_GPU), "version": "2.13.0+cu130", "distribution": "2.13.0",
                                    "cuda": "13.0"})
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    (tmp_path / "venv" / "made-by.txt").write_text(cuda_wheel.executable)  # made before, by this machine's Python
    ran = []
    monkeypatch.setattr(gpu_check.subprocess, "run", lambda command, **kwargs: ran.append(command) or
                        subprocess.CompletedProcess(command, 1, stdout=str(tmp_path), stderr=""))
    gpu_check.build_environment(tmp_path / "venv", cuda_wheel, None)
    assert (tmp_path / "venv" / "torch-constraint.txt").read_text() == "torch==2.13.0\n"
    assert (tmp_path / "machine-torch.pth").read_text() == cuda_wheel.site + "\n"


def test_a_python_that_cannot_make_a_venv_is_told_what_to_install(tmp_path):
    python = tmp_path / "python"  # prints a torch for the probe, fails `-m venv` as Debian's python3 without python3-venv
    python.write_text('#!/bin/sh\n[ "$2" = venv ] && { echo "ensurepip is not available" >&2; exit 1; }\necho ok\n')
    python.chmod(0o755)
    found = gpu_check.Torch(**{**gpu_check.asdict(NO_GPU), "executable": str(python)})
    failed = gpu_check.build_environment(tmp_path / "venv", found, None)
    assert "apt-get install python3-venv" in failed and "无法创建" in failed


REPORT = "{a}: 52 answers; {caught}/40 mistakes caught; {kept}/10 correct answers kept full marks."


@pytest.mark.parametrize("before, after, status, result", [
    ((40, 10), (40, 10), 0, "ok"),
    ((39, 10), (39, 10), 0, "contradiction"),   # a mistake got points
    ((40, 9), (40, 9), 0, "contradiction"),     # a right answer lost some
    ((40, 10), (38, 10), 0, "contradiction"),   # course grade graded otherwise than nbgrader autograde
    ((40, 10), None, 1, "contradiction"),       # course grade failed: no second report
])
def test_course_grade_reads_the_corpus_outcomes_before_and_after(before, after, status, result):
    output = REPORT.format(a="a2_module_to", caught=before[0], kept=before[1]) + "\nGrades: …\n"
    if after:
        output += REPORT.format(a="a2_module_to", caught=after[0], kept=after[1]) + "\n"
    assert gpu_check.corpus_summary(status, output)[0] == result


def test_a_checks_commands_run_in_turn_in_the_output_folder_until_one_fails(tmp_path):
    write = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('x'); print(sys.argv[1])"
    check = gpu_check.Check("steps", "gpu_check_expect_course_grade", ("python", "-c", write, "{out}/first"),
                            needs_gpu=False, judge=gpu_check.pytest_summary,
                            then=(("python", "-c", "import sys; sys.exit(3)"), ("python", "-c", write, "{out}/never")))
    (tmp_path / "logs").mkdir()
    row = gpu_check.run_check(check, NO_GPU, sys.executable, {}, tmp_path / "logs")
    assert (tmp_path / "first").exists() and not (tmp_path / "never").exists() and row.result == "contradiction"


def test_an_environment_made_by_another_machine_python_is_made_anew(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "made-by.txt").write_text("/usr/bin/python3.11")
    python = tmp_path / "python3.12"  # records how it was asked to make the venv, then fails
    python.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "asked"}\nexit 1\n')
    python.chmod(0o755)
    found = gpu_check.Torch(**{**gpu_check.asdict(NO_GPU), "executable": str(python), "python": "3.12.3"})
    assert "python3-venv" in gpu_check.build_environment(venv, found, None)
    assert (tmp_path / "asked").read_text().split() == ["-m", "venv", "--clear", str(venv)]
