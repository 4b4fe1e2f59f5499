"""What `nbgrader collect` copies from a submission in the exchange (course/plugins/exchange.py), on its own."""
import os
import subprocess
import sys

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
