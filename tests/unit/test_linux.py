"""Process hygiene before student code runs (autograder/linux.py): every descriptor but those kept is
closed, whatever its number."""
import json
import os
import resource

from autograder import linux

# the highest descriptor the hard limit of open files allows: where that limit is above 65,536 (the kernel
# allows up to 1,048,576), beyond the fixed bound the verdict and the fork server used to stop at
HIGH = resource.getrlimit(resource.RLIMIT_NOFILE)[1] - 1


def open_after(close, kept_numbers, tmp_path):
    """In a forked child: open a file at descriptor 3 (kept), one at `HIGH` and one at 5; `close` them all
    but `kept_numbers`; report which of the three are still open."""
    hard = HIGH + 1
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (HIGH + 1, hard))
            opened = os.open(tmp_path / "f", os.O_RDONLY | os.O_CREAT)
            for number in (HIGH, 5, 3):
                os.dup2(opened, number)
            os.dup2(writer, HIGH - 1)
            close([HIGH - 1, *kept_numbers])
            still = [n for n in (3, 5, HIGH) if _is_open(n)]
            os.write(HIGH - 1, json.dumps(still).encode())
        finally:
            os._exit(0)
    os.close(writer)
    os.waitpid(pid, 0)
    with os.fdopen(reader) as answer:
        return json.loads(answer.read())


def _is_open(fd) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def test_the_highest_descriptor_the_limits_allow_is_closed_and_the_kept_ones_stay(tmp_path):
    assert open_after(linux.close_all_but, [3], tmp_path) == [3]


def test_without_proc_every_number_below_the_hard_limit_is_closed(tmp_path, monkeypatch):
    def no_proc(path):
        raise FileNotFoundError(path)

    monkeypatch.setattr(linux.os, "listdir", no_proc)
    assert open_after(linux.close_all_but, [3], tmp_path) == [3]
