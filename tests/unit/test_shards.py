"""`course grade --shard I/N` splits a class so that every student is graded exactly once, stably; `course
merge` brings the shards' autograded/ folders back (README, "Beyond one machine"). The real thing, two
concurrent shards into PostgreSQL, is tests/system/test_postgres.py."""
from pathlib import Path

import pytest

from course.cli import main
from course.grading.shards import in_shard, shard_of
from support.messages import shows


ASSIGNMENT = "a1_tensor_to"
CLASS = [f"student{k:04d}" for k in range(1000)] + ["solution", "mistakes-1", "untouched", "broken-json", "李雷"]


@pytest.mark.parametrize("count", [1, 2, 3, 8, 64])
def test_shards_cover_every_student_exactly_once(count):
    shards = [in_shard(CLASS, (index, count)) for index in range(1, count + 1)]
    assert sorted(s for shard in shards for s in shard) == sorted(CLASS)


@pytest.mark.parametrize("count", [2, 8])
def test_shards_are_balanced(count):
    sizes = [len(in_shard(CLASS, (index, count))) for index in range(1, count + 1)]
    expected = len(CLASS) / count
    assert all(abs(size - expected) < 0.25 * expected for size in sizes), sizes


def test_a_students_shard_does_not_change_when_the_class_does():
    before = {s: shard_of(s, 8) for s in CLASS[:500]}
    grown = CLASS[:500] + ["late-joiner", *CLASS[600:]]
    after = {s: index for index in range(1, 9) for s in in_shard(grown, (index, 8))}
    assert {s: after[s] for s in before} == before


def test_the_split_is_the_same_in_every_process():
    """Python's own hash() of a string changes with every process (PYTHONHASHSEED): jobs on different nodes
    must agree on who grades whom. Pinned: a changed split would grade students twice in mid-term."""
    assert [shard_of(s, 8) for s in ["solution", "a", "李雷"]] == [6, 3, 3]


@pytest.mark.parametrize("given", ["0/2", "3/2", "1/0", "2", "a/b", "-1/2", "1/2/3", ""])
def test_a_wrong_shard_is_refused_in_both_languages(given, capsys):
    with pytest.raises(SystemExit) as exit:
        main(["grade", ASSIGNMENT, f"--shard={given}"])
    error = capsys.readouterr().err
    assert exit.value.code == 2
    assert "--shard takes I/N" in error and "--shard 的格式是 I/N" in error


@pytest.mark.parametrize("arguments", [["grade"], ["grade", ASSIGNMENT, "--jobs", "many"], ["no-such-command"]])
def test_a_wrong_command_line_is_explained_in_both_languages(arguments, capsys):
    """argparse's own error line is English; the course's parser follows it with the same in Chinese."""
    with pytest.raises(SystemExit) as exit:
        main(arguments)
    error = capsys.readouterr().err
    assert exit.value.code == 2 and "usage: course" in error
    assert shows(error, "cli_error"), error


def graded(root, student, mark):
    folder = root / "autograded" / student / ASSIGNMENT
    folder.mkdir(parents=True)
    (folder / f"{ASSIGNMENT}.ipynb").write_text(mark)


def test_merge_brings_every_shards_students_into_the_course(tmp_path, capsys):
    course, one, two = tmp_path / "course", tmp_path / "shard-1", tmp_path / "shard-2"
    graded(course, "alice", "stale")   # graded before: the shard's grading replaces it
    graded(course, "carol", "kept")    # not in any shard: left alone
    graded(one, "alice", "one")
    graded(two, "bob", "two")
    (two / "autograded" / "bob" / ASSIGNMENT / "extra.txt").write_text("x")
    assert main(["merge", ASSIGNMENT, str(one), str(two), "--root", str(course)]) == 0
    shown = capsys.readouterr().out
    assert "Merged the autograded notebooks of 2 student(s) from 2 shard folder(s)" in shown
    assert "已把 2 个分片目录中 2 名学生的自动评分 notebook 合并到" in shown
    notebook = f"{ASSIGNMENT}.ipynb"
    found = {p.relative_to(course / "autograded").as_posix(): p.read_text()
             for p in (course / "autograded").rglob("*") if p.is_file()}
    assert found == {f"alice/{ASSIGNMENT}/{notebook}": "one", f"bob/{ASSIGNMENT}/{notebook}": "two",
                     f"bob/{ASSIGNMENT}/extra.txt": "x", f"carol/{ASSIGNMENT}/{notebook}": "kept"}


def test_a_student_graded_in_two_shards_stops_the_merge(tmp_path, capsys):
    course, one, two = tmp_path / "course", tmp_path / "shard-1", tmp_path / "shard-2"
    graded(one, "alice", "one")
    graded(one, "bob", "one")
    graded(two, "alice", "two")
    assert main(["merge", ASSIGNMENT, str(one), str(two), "--root", str(course)]) == 2
    shown = capsys.readouterr().out
    assert f"alice was graded in two shard folders, {one} and {two}" in shown
    assert f"alice 在两个分片目录中都被评分了：{one} 和 {two}" in shown
    assert not (course / "autograded").exists()  # nothing half-merged


def test_merge_brings_each_students_graded_attempts_too(tmp_path, capsys):
    """`course insights` shows a resubmitting student's first attempt from attempts/ (issue 43): a shard's
    record joins the course folder's, the shard's entry winning for the same submission."""
    import json

    from course.plugins.autograde import attempts_file

    course, one = tmp_path / "course", tmp_path / "shard-1"
    graded(one, "alice", "one")

    def record(root, attempts):
        path = Path(attempts_file(root, ASSIGNMENT, "alice"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(attempts))
        return path

    kept = record(course, {"2026-03-01 10:00:00": {"nb": {"test_a": {"key": "forgot_assignment"}}},
                           "2026-03-02 10:00:00": {"nb": {"test_a": {"key": "stale"}}}})
    record(one, {"2026-03-02 10:00:00": {"nb": {"test_a": {}}}})
    assert main(["merge", ASSIGNMENT, str(one), "--root", str(course)]) == 0
    assert json.loads(kept.read_text()) == {"2026-03-01 10:00:00": {"nb": {"test_a": {"key": "forgot_assignment"}}},
                                            "2026-03-02 10:00:00": {"nb": {"test_a": {}}}}
