"""What runs first in every grading kernel, before any student code.

Kept free of nbgrader imports: it runs inside each kernel, where every import costs start-up time.
"""
from os import uname as _KERNELS_UNAME  # bound before any simulation (_architecture)

from .linux import PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER


# The limits of every process that runs a submission, each number written once: the defaults of the course's
# settings (GradingKernelManager.memory_bytes and .cpu_seconds, DecideGrades' limits follow them, and
# Execute.timeout in both nbgrader_config.py files) and of a student's own validation (deploy/student).
MEMORY_BYTES = 6 * 2**30  # RLIMIT_DATA of one process: also where CUDA is present
CPU_SECONDS = 600  # RLIMIT_CPU of one process
CELL_TIMEOUT_S = 120  # wall-clock seconds one cell may run
# Where a test simulates other machines, its caller runs the student's cells again on each (autograder/program.py):
# that time is not the test's, up to this many cell limits for each student cell before the test, one for each
# simulated machine besides the students' (simulate.MACHINES; DecideGrades.with_limits' `allowance`). The
# verdict's parent stops the test's clock meanwhile and says so, once a test, with this record; the grader then
# allows the test as much more (read_records).
RUN_AGAIN_ALLOWANCE = 4
PAUSED_RECORD = '{"paused": true}'


def kernel_arguments(memory_bytes=MEMORY_BYTES, cpu_seconds=CPU_SECONDS) -> list[str]:
    """Arguments for a kernel's command line: every grading kernel runs `start_kernel` first
    (course.kernels.manager.GradingKernelManager adds them; a student's validation sets
    `Execute.extra_arguments`, deploy/student/nbgrader_config.py)."""
    setup = (f"import autograder.kernel as _course; "
             f"_course.start_kernel(memory_bytes={int(memory_bytes)}, cpu_seconds={int(cpu_seconds)})")
    return [f"--IPKernelApp.exec_lines=[{setup!r}]"]


def start_kernel(memory_bytes=None, cpu_seconds=None):
    """Run first in every grading kernel (`kernel_arguments`): remember the real functions,
    then cap the kernel's memory and CPU time so one submission cannot take the machine down."""
    from . import integrity

    own_session_keyring()
    integrity.start_grading()
    limit_resources(memory_bytes, cpu_seconds)


KEYCTL = {"x86_64": 250, "aarch64": 219, "ppc64le": 311, "s390x": 280}  # the keyctl system call's number
KEYCTL_JOIN_SESSION_KEYRING = 1


def own_session_keyring():
    """Leave the grader's session keyring for a new, empty one. The grader's (an ssh or sudo login's, a
    systemd service's, a container's) may hold keys: inherited, the submission could read and revoke them;
    left, it keeps at most the right to see that the keyring exists."""
    import ctypes

    number = KEYCTL.get(_architecture())
    if number is not None:
        ctypes.CDLL(None, use_errno=True).syscall(number, KEYCTL_JOIN_SESSION_KEYRING, None)


def _architecture() -> str:
    """The processor the system calls are numbered for: the kernel's own answer, read with the `os.uname` of before
    any simulation (autograder/simulate.py: a simulated Apple GPU is arm64, in `os.uname()` and `platform` too)."""
    return _KERNELS_UNAME().machine


def limit_resources(memory_bytes=None, cpu_seconds=None):
    """Cap this process's CPU time and memory (its forked children inherit the caps)."""
    import resource

    if cpu_seconds:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
    if memory_bytes:
        # RLIMIT_DATA counts the memory a process writes to (heap and private writable mappings), not
        # address space: CUDA's huge PROT_NONE reservations and the mapped libraries of the CUDA build
        # do not count, so the same limit holds with and without CUDA (RLIMIT_AS would break CUDA).
        resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))


# Seccomp: a sandbox's processes may not trace or read the memory of another process (ptrace,
# process_vm_readv/writev), not even of the sandbox's own init. A classic BPF program, the form both
# `bwrap --seccomp FD` and prctl(PR_SET_SECCOMP) take. System call numbers per architecture; on any
# other architecture there is no filter (the rest of the sandbox still holds).
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
NO_TRACING_CALLS = {"x86_64": (101, 310, 311), "aarch64": (117, 270, 271)}  # ptrace, process_vm_readv, _writev
X32_SYSCALL_BIT = 0x40000000  # x86_64's x32 ABI: its calls are refused as a whole
_BPF_LD_ARCH, _BPF_LD_NR = (0x20, 0, 0, 4), (0x20, 0, 0, 0)  # BPF_LD|BPF_W|BPF_ABS, seccomp_data.arch / .nr
_BPF_JEQ, _BPF_JGE, _BPF_RET = 0x15, 0x35, 0x06
_RET_ALLOW, _RET_EPERM = 0x7FFF0000, 0x00050001  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM


def no_tracing_filter() -> bytes | None:
    """The compiled filter (struct sock_filter[]), or None where the architecture is not known."""
    import struct

    machine = _architecture()
    if machine not in AUDIT_ARCH:
        return None
    refused = NO_TRACING_CALLS[machine]
    checks = [(_BPF_JGE, X32_SYSCALL_BIT)] if machine == "x86_64" else []
    checks += [(_BPF_JEQ, number) for number in refused]
    program = [_BPF_LD_ARCH, (_BPF_JEQ, 0, len(checks) + 2, AUDIT_ARCH[machine]), _BPF_LD_NR]
    for position, (jump, value) in enumerate(checks):
        program.append((jump, len(checks) - position, 0, value))  # match: on to the EPERM at the end
    program += [(_BPF_RET, 0, 0, _RET_ALLOW), (_BPF_RET, 0, 0, _RET_EPERM)]
    return b"".join(struct.pack("HBBI", *instruction) for instruction in program)


def refuse_tracing():
    """Install the filter in this process (and so in everything it starts); needs no_new_privs set."""
    import ctypes

    program = no_tracing_filter()
    if program is None:
        return

    class Program(ctypes.Structure):  # struct sock_fprog
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    fprog = ctypes.byref(Program(len(program) // 8, program))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fprog, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "installing the seccomp filter failed")


# Landlock (Linux 5.13 and later, unprivileged): a process restricts itself and everything it starts.
# The verdict's program process (autograder/verdict.py), which runs the student's code, confines itself
# before it does: it may write only in the temporary folder and /dev/shm (in the sandbox, beside the judges' own
# tmpfs), and (ABI 6, Linux 6.12) may not signal a process outside its domain, so the student's code can neither
# touch the files a judge wrote nor stop the verdict.
LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446  # the same on every architecture
LANDLOCK_RULE_PATH_BENEATH = 1
# what a write is, by the ABI that knows it: write, remove, make (char, dir, file, socket, fifo, block,
# symlink); then reparent (REFER, ABI 2) and truncate (ABI 3)
_WRITES = {1: 0b1_1111_1111_0010, 2: 1 << 13, 3: 1 << 14}
_SCOPES = {6: 0b11}  # abstract Unix sockets, signals


def landlock_abi() -> int:
    import ctypes

    version = ctypes.CDLL(None, use_errno=True).syscall(LANDLOCK_CREATE_RULESET, None, 0, 1)  # _VERSION
    return max(version, 0)


def confine(writable, devices=("/dev",)) -> int:
    """Let this process (and what it starts) write only beneath the folders `writable` (and to the existing
    files of `devices`: /dev/null), and signal only processes confined with it. The Landlock ABI used (0:
    the kernel has none, and nothing is confined)."""
    import ctypes
    import os
    import struct

    abi = landlock_abi()
    if abi < 1:
        return 0
    writes = 0
    for version, bits in _WRITES.items():
        if abi >= version:
            writes |= bits
    scoped = sum(bits for version, bits in _SCOPES.items() if abi >= version)
    libc = ctypes.CDLL(None, use_errno=True)
    attributes = struct.pack("QQQ", writes, 0, scoped) if abi >= 6 else struct.pack("Q", writes)
    ruleset = libc.syscall(LANDLOCK_CREATE_RULESET, attributes, len(attributes), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "creating the Landlock ruleset failed")
    try:
        write_file = 1 << 1 | (1 << 14 if abi >= 3 else 0)
        for path, allowed in [*((folder, writes) for folder in writable), *((device, write_file) for device in devices)]:
            folder = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = struct.pack("=Qi", allowed, folder)
                if libc.syscall(LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, rule, 0) != 0:
                    raise OSError(ctypes.get_errno(), f"a Landlock rule for {path} failed")
            finally:
                os.close(folder)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "no_new_privs failed")
        if libc.syscall(LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "restricting this process with Landlock failed")
    finally:
        os.close(ruleset)
    return abi
