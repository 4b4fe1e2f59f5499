"""What `nbgrader collect` copies from a submission in the exchange (course/plugins/exchange.py), on its own."""
import os
import subprocess
import sys

import pytest

from course.plugins import exchange


def nested(top, depth):
    """`depth` folders, each in the one before, made as a shell would (os.makedirs recurses as deep)."""
    folder = os.open(top, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=folder)
        folder, above = os.open("d", os.O_RDONLY, dir_fd=folder), folder
        os.close(above)
    os.close(folder)


def test_a_submission_deeper_than_python_can_walk_is_collected_but_for_its_depths(tmp_path):
    """A folder 1,500 deep in a submission ended a grading step with RecursionError: collect copies its first
    DEEPEST levels and the rest of the submission, and names where it stopped."""
    submission, collected = tmp_path / "inbound", tmp_path / "submitted"
    submission.mkdir()
    (submission / "notes.txt").write_text("mine")
    nested(submission, sys.getrecursionlimit() + 500)
    try:
        left, _ = exchange.copy_regular_files(submission, collected, None, lambda folder, names: [])
    finally:
        subprocess.run(["rm", "-rf", str(submission)], check=True)  # iterative
    assert left == [os.path.join(*["d"] * (exchange.DEEPEST + 1))]
    assert (collected / "notes.txt").read_text() == "mine"
    assert (collected / os.path.join(*["d"] * exchange.DEEPEST)).is_dir()


def test_the_time_a_submission_last_changed_is_that_of_its_newest_file(tmp_path):
    """A notebook rewritten in place changes its own ctime, not its folder's: a late student rewrote an on-time
    placeholder after the due date, and the folder's time said it was on time."""
    import time

    submission = tmp_path / "inbound"
    (submission / "extra").mkdir(parents=True)
    notebook = submission / "extra" / "a1.ipynb"
    notebook.write_text("placeholder")
    folder_changed = os.lstat(submission).st_ctime
    time.sleep(0.05)
    with open(notebook, "w") as rewritten:  # in place: O_TRUNC, no new entry in any folder
        rewritten.write("late answer")
    _, changed = exchange.copy_regular_files(submission, tmp_path / "submitted", None, lambda folder, names: [])
    assert os.lstat(submission).st_ctime == folder_changed < changed == os.lstat(notebook).st_ctime


FORM = "%Y-%m-%d %H:%M:%S.%f %Z"  # nbgrader's Exchange.timestamp_format


@pytest.mark.parametrize("zone, recorded, claimed, kept", [
    ("UTC", "2026-12-07 12:00:00.000000 UTC", "2026-12-07 11:58:00.000000 UTC", True),  # submit's copy took time
    ("UTC", "2026-12-07 12:00:00.000000 UTC", "2025-12-31 23:00:00.000000 UTC", False),
    # a zone nbgrader's parse_utc reads as UTC: the check compares like with like, as lateness is then measured
    ("Asia/Shanghai", "2026-12-07 20:00:00.000000 CST", "2026-12-07 14:00:00.000000 CST", False),
    ("America/Los_Angeles", "2026-12-07 04:00:00.000000 PST", "2026-12-07 03:58:00.000000 PST", True),
    ("America/Los_Angeles", "2026-12-07 04:00:00.000000 PST", "2026-12-07 03:58:00.000000 PDT", True),  # summer's
    ("UTC", "2026-12-07 12:00:00.000000 UTC", "2026-12-07 12:00:00.000000 /tmp/mytz", False),  # a zone file of theirs
    ("UTC", "2026-12-07 12:00:00.000000 UTC", "yesterday", False),
    ("UTC", "2026-12-07 12:00:00.000000 UTC", b"\xff\xfe", False),
    ("UTC", "2026-12-07 12:00:00.000000 UTC", "2026-12-07 12:00:00.000000 UTC" + " " * 2**20, True),  # read: a line
    ("UTC", "2026-12-07 12:00:00.000000 UTC", None, False),
    ("UTC", "2026-12-07 12:00:00.000000 UTC", "folder", False)])
def test_a_submission_keeps_its_own_time_only_where_the_exchange_agrees(tmp_path, zone, recorded, claimed, kept):
    from dateutil.tz import gettz

    path = tmp_path / "timestamp.txt"
    if claimed == "folder":  # nbgrader's next collect opened it and stopped for the class
        (path / "inside").mkdir(parents=True)
    elif claimed is not None:
        path.write_bytes(claimed if isinstance(claimed, bytes) else claimed.encode())
    replaced = exchange.keep_the_exchanges_time(tmp_path, recorded, FORM, gettz(zone))
    assert (replaced is None) == kept
    assert path.read_text() == (claimed if kept else recorded)


@pytest.mark.parametrize("secret", [b"\xff\xfe not text", b"short", None, "folder"])
def test_a_secret_release_feedback_could_not_read_is_replaced(tmp_path, secret):
    path = tmp_path / "submission_secret.txt"
    if secret == "folder":
        (path / "inside").mkdir(parents=True)
    elif secret is not None:
        path.write_bytes(secret)
    assert not exchange.keep_a_readable_secret(tmp_path)
    assert exchange.SECRET.fullmatch(path.read_text())


def test_a_secret_nbgrader_submit_wrote_is_kept(tmp_path):
    import secrets

    written = secrets.token_hex(64)
    (tmp_path / "submission_secret.txt").write_text(written)
    assert exchange.keep_a_readable_secret(tmp_path)
    assert (tmp_path / "submission_secret.txt").read_text() == written


def test_a_file_is_collected_as_large_as_it_was_checked(tmp_path, monkeypatch):
    """A student grew a file with a hole after collect checked it (a watcher of its reads), and the copy read on to
    its end: 200 MiB of zeros on the grader's disk."""
    submission = tmp_path / "inbound"
    submission.mkdir()
    notes = submission / "notes.txt"
    notes.write_text("mine")
    checked = exchange._has_holes

    def grown_once_checked(opened, info):
        found = checked(opened, info)
        with open(notes, "r+b") as grown:
            grown.truncate(64 * 2**20)
        return found

    monkeypatch.setattr(exchange, "_has_holes", grown_once_checked)
    exchange.copy_regular_files(submission, tmp_path / "submitted", None, lambda folder, names: [])
    assert (tmp_path / "submitted" / "notes.txt").read_bytes() == b"mine"


def test_a_file_with_holes_is_left_behind(tmp_path):
    """`truncate -s 95M` takes no space in the exchange, and its copy wrote every byte: fifteen filled the grader's
    disk at collect."""
    submission = tmp_path / "inbound"
    submission.mkdir()
    (submission / "notes.txt").write_text("mine")
    with open(submission / "data.bin", "wb") as sparse:
        sparse.truncate(64 * 2**20)
    left, _ = exchange.copy_regular_files(submission, tmp_path / "submitted", None, lambda folder, names: [])
    assert left == ["data.bin"]
    assert sorted(os.listdir(tmp_path / "submitted")) == ["notes.txt"]
