"""Grading beyond one machine (README, "Beyond one machine"): `course grade --shard I/N` grades only the
students whose id hashes to shard I of N, so N cluster jobs, each on its own copy of the course folder and
all writing into one PostgreSQL gradebook, grade every student exactly once; `merge` (`course merge`)
brings their autograded/ folders back into one course folder for `nbgrader generate_feedback`, with each
student's attempts/ record."""
import hashlib
import json
import shutil
from pathlib import Path

from autograder.messages import text

from ..plugins.autograde import attempts_file


def shard_of(student: str, shards: int) -> int:
    """The shard (1 to `shards`) that grades `student`: from a hash of the id alone, so it never changes
    when other students are added or removed, and is the same on every machine (unlike `hash()`)."""
    digest = hashlib.sha256(student.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % shards + 1


def in_shard(students, shard: tuple[int, int]) -> list[str]:
    index, count = shard
    return [student for student in students if shard_of(student, count) == index]


def merge(root: Path, assignment: str, shard_roots) -> dict[str, Path]:
    """Copy every student's autograded/STUDENT/ASSIGNMENT folder from the shards' course folders into
    `root`'s, replacing what `root` had for that student. Returns student → the shard folder it came
    from; a student graded in two shard folders is an error (ValueError, bilingual): which grading is in
    the gradebook is then unknown, so nothing is copied."""
    root = Path(root).resolve()
    found = {}
    for shard_root in map(Path, shard_roots):
        folder = shard_root.resolve() / "autograded"
        for graded in sorted(folder.glob(f"*/{assignment}")) if folder.is_dir() else []:
            student = graded.parent.name
            if student in found:
                raise ValueError(text("merge_twice", student=student, first=found[student], second=shard_root))
            found[student] = shard_root
    for student, shard_root in found.items():
        target = root / "autograded" / student / assignment
        if target.resolve() == (Path(shard_root).resolve() / "autograded" / student / assignment):
            continue  # the course folder is one of the shards
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(Path(shard_root) / "autograded" / student / assignment, target)
        merge_attempts(Path(attempts_file(shard_root, assignment, student)), Path(attempts_file(root, assignment, student)))
    return found


def merge_attempts(shard: Path, course: Path):
    """The shard's record of a student's graded submissions joins the course folder's (attempts/, for
    `course insights`' first attempts): the shard's entry wins for a submission graded in both."""
    if not shard.exists():
        return
    recorded = json.loads(course.read_text("utf-8")) if course.exists() else {}
    recorded.update(json.loads(shard.read_text("utf-8")))
    course.parent.mkdir(parents=True, exist_ok=True)
    course.write_text(json.dumps(recorded, indent=1, sort_keys=True), "utf-8")
