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
        left = exchange.copy_regular_files(submission, collected, None, lambda folder, names: [])
    finally:
        subprocess.run(["rm", "-rf", str(submission)], check=True)  # iterative
    assert left == [os.path.join(*["d"] * (exchange.DEEPEST + 1))]
    assert (collected / "notes.txt").read_text() == "mine"
    assert (collected / os.path.join(*["d"] * exchange.DEEPEST)).is_dir()
