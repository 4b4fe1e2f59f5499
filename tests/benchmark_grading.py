"""Benchmark (not a test): plain `nbgrader autograde` vs `course grade --jobs N` on the same class.

    .venv/bin/python tests/benchmark_grading.py [--students 12] [--jobs 2]

Both gradebooks are compared student by student; the wall-time ratio is printed beside the floor of
one submission (a kernel start plus `import torch`), for a new kernel process and for a forked one.
"""
import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from autograder import classroom, forkserver  # noqa: E402

ASSIGNMENT = "a1_tensor_to"


def build_class(root: Path, students: int):
    classroom.prepare_course(root, ASSIGNMENT)
    variants = list(classroom.students_from_corpus(classroom.load_corpus(ASSIGNMENT)).values())
    for index in range(students):
        answers = variants[index % len(variants)]
        classroom.submit(root, ASSIGNMENT, f"student-{index:03d}", classroom.solved_notebook(root, ASSIGNMENT, answers))


def timed(command, cwd):
    started = time.monotonic()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    return time.monotonic() - started


def floor_seconds(provisioner, repeats=3) -> float:
    """A kernel start plus `import torch`: what every submission pays before its first cell."""
    from jupyter_client.manager import start_new_kernel
    from jupyter_client.provisioning import KernelProvisionerFactory

    KernelProvisionerFactory.instance().default_provisioner_name = provisioner
    start_new_kernel(kernel_name="python3")[0].shutdown_kernel(now=True)  # a fork server starts once
    times = []
    for _ in range(repeats):
        started = time.monotonic()
        manager, client = start_new_kernel(kernel_name="python3")
        client.execute_interactive("import torch", timeout=120)
        times.append(time.monotonic() - started)
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return sorted(times)[len(times) // 2]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    bin_dir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as tmp:
        plain, parallel = Path(tmp) / "plain", Path(tmp) / "parallel"
        build_class(plain, args.students)
        build_class(parallel, args.students)
        plain_s = timed([str(bin_dir / "nbgrader"), "autograde", ASSIGNMENT], plain)
        parallel_s = timed([str(bin_dir / "course"), "grade", ASSIGNMENT, "--jobs", str(args.jobs)], parallel)
        same = classroom.scores(plain, ASSIGNMENT) == classroom.scores(parallel, ASSIGNMENT)
    started, forked = floor_seconds("local-provisioner"), floor_seconds(forkserver.NAME)
    print(f"{args.students} submissions · plain nbgrader autograde {plain_s:.1f} s · "
          f"course grade --jobs {args.jobs} {parallel_s:.1f} s · ratio {plain_s / parallel_s:.2f}x · "
          f"gradebooks identical: {same}")
    print(f"floor per submission (kernel start + import torch): {started:.2f} s for a new kernel process, "
          f"{forked:.2f} s for a kernel forked from the fork server; "
          f"plain nbgrader per submission: {plain_s / args.students:.2f} s")


if __name__ == "__main__":
    main()
