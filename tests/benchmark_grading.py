"""Benchmark (not a test): sandboxed `course grade --jobs N` vs plain, unsandboxed `nbgrader autograde`.

    .venv/bin/python tests/benchmark_grading.py [--students 12] [--jobs 2] [--repeats 3]

Both grade the same class; the gradebooks are compared student by student. Then what a submission
pays before its first cell (a kernel start plus `import torch`) is measured four ways — a new kernel
process or a kernel forked from the fork server, each with and without its sandbox — and the sandbox
alone (bwrap building one and tearing it down). The machine's load is printed before and after: other
work on the same cores makes every number slower, and the ratio less certain.
"""
import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from traitlets.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course import classroom
from course.kernels import sandbox  # noqa: E402
from course.kernels.manager import GradingKernelManager  # noqa: E402
from support.paths import with_bin_on_path  # noqa: E402: tests/, this script's folder, is on sys.path

ASSIGNMENT = "a1_tensor_to"


def build_class(root: Path, students: int):
    classroom.prepare_course(root, ASSIGNMENT)
    variants = list(classroom.students_from_corpus(classroom.load_corpus(ASSIGNMENT)).values())
    for index in range(students):
        answers = variants[index % len(variants)]
        classroom.submit(root, ASSIGNMENT, f"student-{index:03d}", classroom.solved_notebook(root, ASSIGNMENT, answers))


def timed(command, cwd, env):
    started = time.monotonic()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True, env=env)
    return time.monotonic() - started


def load() -> str:
    return os.getloadavg().__repr__()


def floor_seconds(sandboxed: bool, forked: bool, repeats: int) -> float:
    """Median of: start a grading kernel, `import torch` in it, until the import has finished."""
    manager_class = type("Manager", (GradingKernelManager,), {"fork_server": forked})
    config = Config({"Sandbox": {"enabled": sandboxed}})

    async def once():
        started = time.monotonic()
        manager = manager_class(kernel_name="python3", config=config)
        await manager.start_kernel(cwd=work)
        client = manager.client()
        client.start_channels()
        await client.wait_for_ready(timeout=300)
        await client.execute_interactive("import torch", timeout=300)
        elapsed = time.monotonic() - started
        client.stop_channels()
        await manager.shutdown_kernel(now=True)
        return elapsed

    async def measure():
        await once()  # a fork server starts once per grading process
        return [await once() for _ in range(repeats)]

    with tempfile.TemporaryDirectory(prefix="benchmark-kernel-") as work:
        return statistics.median(asyncio.run(measure()))


def sandbox_seconds(repeats: int) -> float:
    """Median of: build a sandbox around a holder process (bwrap), then kill it and clean up."""
    times = []
    for _ in range(repeats * 3):
        with tempfile.TemporaryDirectory(prefix="benchmark-sandbox-") as work:
            started = time.monotonic()
            box = sandbox.KernelSandbox(work)
            os.close(box.start_holder(sandbox.environment(gpus=box.settings.gpus)))
            box.close()
            times.append(time.monotonic() - started)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sandbox.require()
    env = with_bin_on_path()
    print(f"load average before (1, 5, 15 min): {load()} on {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        plain, parallel = Path(tmp) / "plain", Path(tmp) / "parallel"
        build_class(plain, args.students)
        build_class(parallel, args.students)
        # nbgrader as it starts kernels itself: a new process each (the course's configuration forks them)
        plain_s = timed([str(bin_dir / "nbgrader"), "autograde", ASSIGNMENT, "--GradingKernelManager.fork_server=False"], plain,
                        {**env, sandbox.NO_SANDBOX_VARIABLE: "1"})
        parallel_s = timed([str(bin_dir / "course"), "grade", ASSIGNMENT, "--jobs", str(args.jobs)], parallel,
                           {**env, sandbox.NO_SANDBOX_VARIABLE: "0"})
        same = classroom.scores(plain, ASSIGNMENT) == classroom.scores(parallel, ASSIGNMENT)
    print(f"{args.students} submissions · plain nbgrader autograde, unsandboxed {plain_s:.1f} s · "
          f"course grade --jobs {args.jobs}, sandboxed {parallel_s:.1f} s · ratio {plain_s / parallel_s:.2f}x · "
          f"gradebooks identical: {same}", flush=True)
    floors = {(sandboxed, forked): floor_seconds(sandboxed, forked, args.repeats)
              for forked in (False, True) for sandboxed in (False, True)}
    alone = sandbox_seconds(args.repeats)
    print("kernel start + import torch, per submission (median):")
    for forked in (False, True):
        kind = "forked from the fork server" if forked else "new kernel process"
        bare, boxed = floors[(False, forked)], floors[(True, forked)]
        print(f"  {kind:28} unsandboxed {bare:.2f} s · sandboxed {boxed:.2f} s · sandbox cost {boxed - bare:+.2f} s")
    print(f"  the sandbox alone (bwrap builds it around a holder, then it is killed and cleaned up): {alone * 1000:.0f} ms")
    print(f"plain nbgrader per submission: {plain_s / args.students:.2f} s")
    print(f"load average after (1, 5, 15 min): {load()}")


if __name__ == "__main__":
    main()
