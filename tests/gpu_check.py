"""The whole course proven on this machine's GPU with this machine's own PyTorch: `make gpu-check`, or
`python3 tests/gpu_check.py [--wheels DIR]` where there is no make (README, "CI and GPU runners").

Run it with the Python whose PyTorch (a CUDA build) the machine already has. That PyTorch is used, never
replaced: the course's other dependencies go into build/gpu-check/venv, an environment that sees it through
a `.pth` file and installs under a constraint pinning it to the version found, from the package index or,
offline, from a wheel folder (`--wheels`). Then the checks below run side by side, each in a process of its
own with its log in build/gpu-check/logs/, and the script prints one table (check, expected, seen) and writes
build/gpu-check/gpu-check.json. It exits 1 on any contradiction, 2 when it cannot start (no PyTorch, one older
than the course's minimum, a Python older than the course's, COURSE_REQUIRE_CUDA set on a machine without a
CUDA GPU, an environment that could not be built or would replace PyTorch).

Without a CUDA GPU every check that needs one says "skipped: no CUDA GPU"; the rest run. Only the standard
library and the message catalogue are imported here: this runs before the course's environment exists.
"""
import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from autograder.messages import Bilingual, message, text  # noqa: E402  (standard library only)

OUT = ROOT / "build" / "gpu-check"
ASSIGNMENTS = ("a1_tensor_to", "a2_module_to", "a3_precision_transfers", "a4_several_devices")
CHECK_TIMEOUT_S = 900  # one check; the whole run is meant to take under 10 minutes on one GPU and 16 cores


# ------------------------------------------------------------------ the machine's PyTorch
PROBE = """import importlib.metadata, json, os, sys, torch
print(json.dumps({"version": torch.__version__, "distribution": importlib.metadata.version("torch"), "cuda": torch.version.cuda,
                  "gpus": torch.cuda.device_count() if torch.cuda.is_available() else 0,
                  "site": os.path.dirname(os.path.dirname(torch.__file__)),
                  "python": ".".join(map(str, sys.version_info[:3])), "executable": sys.executable}))"""


@dataclass(frozen=True)
class Torch:
    """The PyTorch a Python interpreter imports, and what it sees of this machine."""
    version: str
    distribution: str  # the version pip knows it by: PyPI's CUDA wheel is 2.13.0 where torch.__version__ says 2.13.0+cu130
    cuda: str | None   # the CUDA version it was built for; None: the CPU build
    gpus: int          # CUDA GPUs it can use now
    site: str          # the folder that holds the `torch` package
    python: str        # that interpreter's version
    executable: str


def find_torch(python: str) -> Torch | None:
    """The PyTorch that `python` imports, or None when it has none."""
    done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return None
    return Torch(**json.loads(done.stdout.strip().splitlines()[-1]))


def release(version: str) -> tuple[int, ...]:
    """The numeric release of a version: 2.11.0+cu130 → (2, 11, 0); 2.6.0a0+ecf3bae → (2, 6, 0)."""
    return tuple(int(part) for part in re.match(r"\d+(?:\.\d+)*", version)[0].split("."))


@dataclass(frozen=True)
class CourseTorch:
    """What the course asks of PyTorch and Python, read where the project states it."""
    minimum: str   # pyproject.toml's dependency: older is refused
    pin: str       # what `make install` installs (Makefile): the version the stored outputs come from
    python: str    # pyproject.toml's requires-python lower bound


def course_torch(root: Path = ROOT) -> CourseTorch:
    project = (root / "pyproject.toml").read_text("utf-8")
    return CourseTorch(minimum=re.search(r'"torch>=([\d.]+)"', project)[1],
                       pin=re.search(r"torch==([\d.]+)", (root / "Makefile").read_text("utf-8"))[1],
                       python=re.search(r'requires-python = ">=([\d.]+)', project)[1])


def refusal(found: Torch | None, course: CourseTorch, python: str) -> str | None:
    """Why the PyTorch of `python` cannot be used for the check (a bilingual message), or None when it can."""
    if found is None:
        return message("gpu_check_no_torch", python=python)
    if release(found.version) < release(course.minimum):
        return message("gpu_check_torch_too_old", version=found.version, minimum=course.minimum)
    if release(found.python) < release(course.python):
        return message("gpu_check_python_too_old", version=found.python, minimum=course.python)
    if os.environ.get("COURSE_REQUIRE_CUDA", "") not in ("", "0") and not found.gpus:
        # a GPU job whose every check was skipped would pass on the CPU alone
        return message("cuda_required", torch_version=found.version, cuda_version=found.cuda)
    return None


# ------------------------------------------------------------------ the course's environment
def course_requirements(root: Path = ROOT) -> list[str]:
    """What the course needs with its test extras, as pyproject.toml lists them."""
    import tomllib  # Python 3.11, which refusal() has checked

    project = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["test"]]


def install_commands(venv: Path, found: Torch, wheels: Path | None) -> list[list[str]]:
    """pip, into `venv`: the course's dependencies, never another torch (a constraint pins torch to the
    version found, which the venv sees through its .pth file), each at a version made for this Python; then
    the course itself, editable and without dependencies, whatever Python it pins (3.11: a newer one's
    version is reported, not refused)."""
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    index = ["--no-index", "--find-links", str(wheels)] if wheels else []
    return [[*pip, "--constraint", str(venv / "torch-constraint.txt"), *index, *course_requirements()],
            [*pip, "--no-deps", "--ignore-requires-python", *index, "-e", str(ROOT)]]


def build_environment(venv: Path, found: Torch, wheels: Path | None) -> str | None:
    """build/gpu-check/venv with the course in it and the machine's PyTorch seen, not copied. Returns why
    it could not be built (a bilingual message), or None."""
    python, made_by = venv / "bin" / "python", venv / "made-by.txt"
    if not (python.exists() and made_by.exists() and made_by.read_text("utf-8") == found.executable):
        # made anew for another machine Python: its own version's packages, never the last one's
        if subprocess.run([found.executable, "-m", "venv", "--clear", str(venv)]).returncode != 0:
            return message("gpu_check_venv_failed", python=found.executable)
        made_by.write_text(found.executable, "utf-8")
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # after the venv's own folder on sys.path: the course's dependencies installed here win, torch comes from there
    (Path(site) / "machine-torch.pth").write_text(found.site + "\n", "utf-8")
    (venv / "torch-constraint.txt").write_text(f"torch=={found.distribution}\n", "utf-8")
    for command in install_commands(venv, found, wheels):
        if subprocess.run(command).returncode != 0:
            return message("gpu_check_install_failed", wheels=wheels or "-")
    seen = find_torch(str(python))
    if seen is None or (seen.version, seen.site) != (found.version, found.site):
        return message("gpu_check_torch_replaced", version=found.version, site=found.site,
                       seen=f"{seen.version} ({seen.site})" if seen else "-")
    return None


# ------------------------------------------------------------------ the checks
@dataclass(frozen=True)
class Check:
    """Commands of the course's environment, run in turn from the repository root (the first failing one
    ends the check), and what they must show."""
    name: str
    expected: str                          # message key: what holds when the course is right
    command: tuple[str, ...]               # "python" is the course environment's interpreter, {out} the output folder
    needs_gpu: bool = True
    judge: Callable[[int, str], tuple[str, str]] | None = None  # (exit status, output) → (result, seen)
    precondition: str | None = None        # Python code printing why the check cannot run here, or nothing
    times_the_gpu: bool = False            # runs the lessons' timing cells on the GPU: never beside another such check
    then: tuple[tuple[str, ...], ...] = ()  # commands run after `command`, in the same way


def pytest_summary(status: int, output: str) -> tuple[str, str]:
    """pytest's closing counts ("281 passed, 1 failed"): ok when pytest exits 0 having run something."""
    counts = re.findall(rf"(\d+) ({COUNTED})", _last_summary(output))
    seen = ", ".join(f"{n} {word}" for n, word in counts) or "no summary (see its log)"
    ran = any(word in ("passed", "failed", "error", "errors") for _, word in counts)
    return ("ok" if status == 0 and ran else "contradiction"), seen


COUNTED = "passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?"


def _last_summary(output: str) -> str:
    lines = [line for line in output.splitlines() if re.search(rf"\d+ ({COUNTED}).* in [\d.]+s", line)]
    return lines[-1] if lines else ""


def claims_summary(status: int, output: str) -> tuple[str, str]:
    """tests/gpu_claims.py's closing line ("44 passed, 0 failed, 6 not checked on this machine"); a claim that
    only PyTorch's wording contradicts, on a torch other than the pin, makes the row a version difference."""
    found = re.findall(r"^\d+ passed, \d+ failed.*$", output, re.M)
    if status != 0 or not found:
        return "contradiction", found[-1] if found else "no summary (see its log)"
    return ("version" if VERSION_ONLY.search(found[-1]) else "ok"), found[-1]


VERSION_ONLY = re.compile(r"[1-9]\d* differ only with the torch version")


def corpus_summary(status: int, output: str) -> tuple[str, str]:
    """`course report`'s count of a class graded by `nbgrader autograde`, then again after `course grade
    --force`: ok when every mistake is caught and every right answer keeps full marks, both times."""
    found = re.findall(r"^\w+: \d+ answers; (\d+)/(\d+) mistakes caught; (\d+)/(\d+) correct answers kept full marks\.$",
                       output, re.M)
    if len(found) < 2:
        return "contradiction", f"{len(found)} of 2 reports (see its log)"
    (caught, wrong, kept, right), after = found[0], found[-1]
    seen = f"{caught}/{wrong} mistakes caught, {kept}/{right} right answers kept; after course grade: " + \
           ("the same" if after == found[0] else "{}/{} caught, {}/{} kept".format(*after))
    holds = status == 0 and after == found[0] and caught == wrong and kept == right
    return ("ok" if holds else "contradiction"), seen


PYTEST = ("python", "-m", "pytest", "-p", "no:cacheprovider", "-q")
CGROUPS_PROBLEM = "from course.kernels import cgroups; print(cgroups.problem() or '')"


def course_grade(assignment: str) -> Check:
    """The demo class graded in the sandbox by `nbgrader autograde` (`course report`), then again by
    `course grade --force`, the corpus's outcomes read back after each."""
    report = ("python", "-m", "course.cli", "report", "--root", f"{{out}}/classes/{assignment}", "--assignment", assignment)
    return Check(f"course grade: {assignment}", "gpu_check_expect_course_grade", report, judge=corpus_summary,
                 then=(("python", "-m", "course.cli", "grade", assignment, "--root", f"{{out}}/classes/{assignment}",
                        "--force", "--jobs", str(max(2, (os.cpu_count() or 1) // 4))), (*report, "--reuse")))


CHECKS = (
    Check("lessons on the GPU + claims", "gpu_check_expect_claims", ("python", "tests/gpu_claims.py"),
          judge=claims_summary, times_the_gpu=True),
    Check("nbval: lessons", "gpu_check_expect_nbval", (*PYTEST, "notebooks"), judge=pytest_summary, times_the_gpu=True),
    Check("nbval: solutions", "gpu_check_expect_nbval", (*PYTEST, "source"), judge=pytest_summary),
    *(Check(f"grading: {a}", "gpu_check_expect_corpus", (*PYTEST, "tests/grading/test_grading.py", "-k", a),
            judge=pytest_summary) for a in ASSIGNMENTS),
    *(course_grade(a) for a in ASSIGNMENTS),
    Check("boundary and checks with cuda", "gpu_check_expect_boundary",
          (*PYTEST, "tests/unit/test_boundary.py", "tests/unit/test_checks.py"), judge=pytest_summary),
    Check("a kernel bounded as a whole", "gpu_check_expect_bounded",
          (*PYTEST, "tests/system/test_sandbox.py", "-k", "bounded_as_a_whole or group_is_gone"),
          needs_gpu=False, judge=pytest_summary, precondition=CGROUPS_PROBLEM),
)


@dataclass
class Row:
    """One line of the table and of the JSON file."""
    check: str
    expected: str
    seen: str
    result: str       # "ok", "contradiction", "skipped", "version" (holds, but PyTorch's words differ from the pin's)
    seconds: float = 0.0
    log: str = ""


def environment(venv: Path, found: Torch) -> dict:
    """The checks' environment: the course's venv first on PATH (course, nbgrader, jupyter), CUDA required
    where there is a GPU (the variable's own value when set: 2 asks for the two-GPU claims too), and the
    build the suite asserts it runs under."""
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
           "COURSE_TORCH_BUILD": "cuda" if found.cuda else "cpu", "PYTHONUNBUFFERED": "1"}
    env.pop("VIRTUAL_ENV", None)
    if found.gpus:
        env["COURSE_REQUIRE_CUDA"] = os.environ.get("COURSE_REQUIRE_CUDA") or "1"
    return env


# Lessons 7, 8 and 10 time copies and matrix products on the GPU and assert what they measured (pinned
# faster than pageable, float16 faster than float32): two runs of them at once would time each other.
GPU_TIMINGS = threading.Lock()


def run_check(check: Check, found: Torch, python: str, env: dict, logs: Path, timeout: float = CHECK_TIMEOUT_S) -> Row:
    expected = _both(text(check.expected))
    if check.needs_gpu and not found.gpus:
        return Row(check.name, expected, _both(text("gpu_check_no_gpu")), "skipped")
    if check.precondition:
        why = subprocess.run([python, "-c", check.precondition], capture_output=True, text=True, env=env,
                             cwd=ROOT).stdout.strip()
        if why:
            return Row(check.name, expected, why, "skipped")
    log = logs / (re.sub(r"[^\w]+", "-", check.name).strip("-") + ".log")
    commands = [[python if part == "python" else part.format(out=logs.parent) for part in command]
                for command in (check.command, *check.then)]
    with GPU_TIMINGS if check.times_the_gpu else contextlib.nullcontext():
        return _run(check, commands, env, log, expected, timeout)


def _run(check: Check, commands: list[list[str]], env: dict, log: Path, expected: str, timeout: float) -> Row:
    started = time.monotonic()
    status = 0
    with log.open("w", encoding="utf-8") as written:
        for command in commands:
            try:
                status = subprocess.run(command, cwd=ROOT, env=env, stdout=written, stderr=subprocess.STDOUT,
                                        timeout=max(1, timeout - (time.monotonic() - started))).returncode
            except subprocess.TimeoutExpired:
                status = None
            if status != 0:
                break
    seconds = round(time.monotonic() - started, 1)
    if status is None:
        return Row(check.name, expected, f"timed out after {timeout} s", "contradiction", seconds, str(log))
    result, seen = check.judge(status, log.read_text("utf-8", errors="replace"))
    return Row(check.name, expected, seen, result, seconds, str(log))


def _both(shown: Bilingual) -> str:
    return f"{shown.en} / {shown.zh}"


RESULTS = {"ok": "gpu_check_ok", "contradiction": "gpu_check_contradiction", "skipped": "gpu_check_skipped",
           "version": "gpu_check_version"}


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table, ready to paste into a note."""
    lines = ["| check | expected | seen | result |", "|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row.check} | {row.expected} | {row.seen} | {_both(text(RESULTS[row.result]))} |")
    return "\n".join(lines)


def report(rows: list[Row], found: Torch, course: CourseTorch) -> dict:
    return {"torch": asdict(found), "course": asdict(course), "same_version_as_pin": found.version.split("+")[0] == course.pin,
            "checks": [asdict(row) for row in rows],
            "contradictions": sum(row.result == "contradiction" for row in rows)}


def run_checks(checks, found: Torch, python: str, env: dict, out: Path, jobs: int) -> list[Row]:
    """Every check, `jobs` at a time, in the order given (the longest first); rows in that order."""
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(lambda check: run_check(check, found, python, env, logs), checks))


def arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=message("gpu_check_description"))
    parser.add_argument("--python", default=sys.executable, help=message("gpu_check_help_python"))
    parser.add_argument("--wheels", type=Path, help=message("gpu_check_help_wheels"))
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 1) // 2), help=message("gpu_check_help_jobs"))
    parser.add_argument("--out", type=Path, default=OUT, help=message("gpu_check_help_out"))
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = arguments(argv)
    course = course_torch()
    found = find_torch(args.python)
    refused = refusal(found, course, args.python)
    if refused:
        print(refused)
        return 2
    print(message("gpu_check_found", version=found.version, cuda=found.cuda or "-", gpus=found.gpus, site=found.site,
                  pin=course.pin, python=found.python, course_python=course.python))
    if found.version.split("+")[0] != course.pin:
        print(message("gpu_check_other_version", version=found.version, pin=course.pin))
    venv = args.out / "venv"
    args.out.mkdir(parents=True, exist_ok=True)
    failed = build_environment(venv, found, args.wheels)
    if failed:
        print(failed)
        return 2
    rows = run_checks(CHECKS, found, str(venv / "bin" / "python"), environment(venv, found), args.out, args.jobs)
    summary = report(rows, found, course)
    (args.out / "gpu-check.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(table(rows))
    print(message("gpu_check_done", contradictions=summary["contradictions"], json=args.out / "gpu-check.json",
                  logs=args.out / "logs"))
    return 1 if summary["contradictions"] else 0


if __name__ == "__main__":
    sys.exit(main())
