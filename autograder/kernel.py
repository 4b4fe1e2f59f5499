"""What runs first in every grading kernel, before any student code.

Kept free of nbgrader imports: it runs inside each kernel, where every import costs start-up time.
"""


def kernel_arguments(memory_bytes, cpu_seconds) -> list[str]:
    """Arguments for `Execute.extra_arguments`: every grading kernel runs `start_kernel` first."""
    setup = (f"import autograder.kernel as _course; "
             f"_course.start_kernel(memory_bytes={int(memory_bytes)}, cpu_seconds={int(cpu_seconds)})")
    return [f"--IPKernelApp.exec_lines=[{setup!r}]"]


def start_kernel(memory_bytes=None, cpu_seconds=None):
    """Run first in every grading kernel (`Execute.extra_arguments`): remember the real functions,
    then cap the kernel's memory and CPU time so one submission cannot take the machine down."""
    import resource

    from . import integrity

    integrity.start_grading()
    if cpu_seconds:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
    if memory_bytes and not _cuda_present():
        # Address-space limits break CUDA, which reserves huge virtual ranges; GPU graders rely on the
        # container's memory limit instead (README, threat model).
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def _cuda_present() -> bool:
    import torch

    return torch.cuda.is_available()
