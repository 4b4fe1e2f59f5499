"""Grading beyond one machine, for real (README, "Beyond one machine"): a real PostgreSQL server, one
class graded in two concurrent shards (`course grade --shard I/2`, each on its own copy of the course
folder, both writing into the one PostgreSQL gradebook), compared with the single SQLite run of the same
class; then the shards' autograded/ folders merged for `nbgrader generate_feedback`, and `nbgrader
export` from the PostgreSQL gradebook.

The server is Debian's `postgresql` (`make postgresql` installs it), started in a temporary folder on a
loopback port as an unprivileged user (PostgreSQL refuses to run as root), stopped and removed when the
module ends, also when a test fails.
"""
import csv
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from course import classroom, settings
from course.grading import submitted_students
from course.grading.shards import in_shard, shard_of
from course.kernels.sandbox import SANDBOX_UID
from support import system_tools
from support.paths import BIN, free_port, with_bin_on_path

pytestmark = pytest.mark.build_independent  # the gradebook's database and the shards; no PyTorch build changes them: .ci/run runs it once

ASSIGNMENT = "a1_tensor_to"
SHARDS = 2
COURSE_ID = "torch-to"  # nbgrader_config.py


def postgresql_bin() -> Path:
    """Debian keeps the server's programs out of PATH, in /usr/lib/postgresql/VERSION/bin."""
    found = shutil.which("pg_ctl") or max(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), default=None,
                                            key=lambda p: int(Path(p).parts[-3]))
    if not found:
        system_tools.missing("PostgreSQL", "make postgresql: apt-get install postgresql", "COURSE_SKIP_POSTGRESQL")
    return Path(found).resolve().parent




@pytest.fixture(scope="module")
def postgres():
    """The URL of a `gradebook` database on a fresh PostgreSQL server (trust authentication, loopback only).
    Not pytest-postgresql's `postgresql_proc` (code review 5efd9e0, F): it runs initdb and pg_ctl as the user
    pytest runs as, and both refuse root (pytest-postgresql issue 455), which CI and containers run as."""
    programs = postgresql_bin()
    # as root, the server runs as Debian's `postgres` user; its folder is outside pytest's root-only tmp
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    folder = Path(tempfile.mkdtemp(prefix="course-pg-"))
    data, port = folder / "data", free_port()
    try:
        if as_user:
            shutil.chown(folder, "postgres")

        def server(*args):
            return subprocess.run([*as_user, str(programs / args[0]), *args[1:]], capture_output=True, text=True)

        done = server("initdb", "-D", data, "-U", "course", "--auth=trust", "-E", "UTF8", "--no-locale")
        assert done.returncode == 0, done.stdout + done.stderr
        options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={folder}"
        done = server("pg_ctl", "-D", data, "-w", "-t", "60", "-l", folder / "server.log", "-o", options, "start")
        log = folder / "server.log"
        assert done.returncode == 0, done.stdout + done.stderr + (log.read_text() if log.exists() else "")
        done = subprocess.run([str(programs / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "course",
                               "gradebook"], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        yield f"postgresql+psycopg://course@127.0.0.1:{port}/gradebook"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run([*as_user, str(programs / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                           capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def probe_notebook(root: Path, port: int):
    """A solved submission whose first cell tries to write next to the course's files and reports what its
    kernel could see and reach: the course folder above its working folder, the PostgreSQL server, the
    gradebook's URL, and which user it runs as."""
    notebook = classroom.solved_notebook(root, ASSIGNMENT)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(f"""\
import os, socket
course = os.path.join(os.getcwd(), "..", "..", "..")
try:  # a kernel outside the sandbox would leave this file in the course folder
    open(os.path.join(course, "escaped-" + os.path.basename(os.path.dirname(os.getcwd()))), "w").close()
except OSError:
    pass
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
    reached = True
except OSError:
    reached = False
print("sees the course:", os.path.exists(os.path.join(course, "nbgrader_config.py")),
      "| reached the gradebook:", reached, "| saw COURSE_DB_URL:", "COURSE_DB_URL" in os.environ,
      "| uid:", os.getuid())"""))
    return notebook


def probes() -> dict[int, str]:
    """One probe student per shard."""
    names = (f"probe-{k}" for k in itertools.count(1))
    chosen = {}
    while len(chosen) < SHARDS:
        name = next(names)
        chosen.setdefault(shard_of(name, SHARDS), name)
    return chosen


def run(command, root, db_url):
    return subprocess.Popen([str(BIN / command[0]), *map(str, command[1:])], cwd=root, text=True,
                            env={**os.environ, "COURSE_DB_URL": db_url,
                                 "PATH": with_bin_on_path()["PATH"]},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def finished(process, timeout=600) -> str:
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output
    return output


@pytest.fixture(scope="module")
def sharded(postgres, demo, course_folder):
    """The demo class (graded once by plain `nbgrader autograde` into SQLite) and one probe per shard, graded
    again by two concurrent `course grade --shard I/2` jobs on copies of the course folder, into PostgreSQL."""
    single = demo(ASSIGNMENT).graded
    course = course_folder(ASSIGNMENT, "sharded")
    shutil.copytree(single.root / "submitted", course / "submitted")
    port = int(postgres.rsplit(":", 1)[1].split("/")[0])
    for name in probes().values():
        classroom.submit(course, ASSIGNMENT, name, probe_notebook(course, port))
    # releasing the assignment records it, its notebooks and their test cells in the PostgreSQL gradebook
    finished(run(["nbgrader", "generate_assignment", ASSIGNMENT, "--force"], course, postgres))
    shards = [course.with_name(f"shard-{i}") for i in range(1, SHARDS + 1)]
    for shard in shards:
        shutil.copytree(course, shard)
    started = time.monotonic()
    jobs = [run(["course", "grade", ASSIGNMENT, "--jobs", 1, "--shard", f"{i}/{SHARDS}", "--root", shard],
                shard, postgres) for i, shard in enumerate(shards, start=1)]
    try:
        outputs = [finished(job) for job in jobs]
    finally:
        for job in jobs:
            job.kill()  # (no-op when it finished) a failed shard leaves no other one running
    print(f"{SHARDS} concurrent shards into PostgreSQL: {time.monotonic() - started:.1f} s")
    return single, course, shards, outputs


def gradebook(db_url: str, assignment: str, students=None) -> dict:
    """Every grade (scores and needs_manual_grade) and every comment nbgrader stored, per student and cell."""
    from nbgrader.api import Gradebook

    rows = {}
    with Gradebook(db_url, COURSE_ID) as book:
        for submission in book.assignment_submissions(assignment):
            if students is not None and submission.student_id not in students:
                continue
            for notebook in submission.notebooks:
                key = (submission.student_id, notebook.name)
                for grade in notebook.grades:
                    rows[(*key, "grade", grade.name)] = (grade.auto_score, grade.manual_score,
                                                         grade.extra_credit, grade.needs_manual_grade)
                for comment in notebook.comments:
                    rows[(*key, "comment", comment.name)] = (comment.auto_comment, comment.manual_comment)
    return rows


def test_every_student_is_graded_by_exactly_its_shard(sharded):
    _, course, shards, outputs = sharded
    everyone = submitted_students(course, ASSIGNMENT)
    for index, (shard, output) in enumerate(zip(shards, outputs), start=1):
        mine = in_shard(everyone, (index, SHARDS))
        assert f"Shard {index}/{SHARDS}: {len(mine)} of the {len(everyone)} student(s) to grade." in output
        assert f"第 {index}/{SHARDS} 片：要评分的 {len(everyone)} 名学生中的 {len(mine)} 名。" in output
        graded = {p.name for p in (shard / "autograded").iterdir()}
        assert graded == set(mine) - {classroom.BROKEN}, output  # nbgrader keeps no folder for a broken file
    assert all(in_shard(everyone, (i, SHARDS)) for i in range(1, SHARDS + 1)), "a shard with nobody to grade"


def test_postgresql_gradebook_is_identical_to_the_single_sqlite_run(sharded, postgres):
    single, _, _, _ = sharded
    expected = gradebook(settings.gradebook_url(settings.load(single.root)), ASSIGNMENT)
    found = gradebook(postgres, ASSIGNMENT, students={s for s, *_ in expected})
    students = {s for s, *_ in expected}
    assert set(single.students) <= students
    # the comparison covers every kind of row: points lost, comments, cells waiting for a person
    assert any(row[3] for key, row in expected.items() if key[2] == "grade"), "no needs_manual_grade in the class"
    assert any(row[0] == 0 for key, row in expected.items() if key[2] == "grade"), "no lost points in the class"
    assert any(key[2] == "comment" for key in expected)
    assert found == expected
    assert {s for s, *_ in gradebook(postgres, ASSIGNMENT)} == students | set(probes().values())


def test_every_shard_grades_in_the_sandbox(sharded, postgres):
    _, course, shards, _ = sharded
    for index, shard in enumerate(shards, start=1):
        probe = probes()[index]
        assert shard_of(probe, SHARDS) == index
        graded = nbformat.read(classroom.notebook_path(shard, "autograded", ASSIGNMENT, probe), as_version=4)
        assert graded.cells[0].outputs[0]["text"].strip() == (
            f"sees the course: False | reached the gradebook: False | saw COURSE_DB_URL: False | uid: {SANDBOX_UID}")
        assert not list(shard.glob("escaped-*")) and not list(course.glob("escaped-*"))
    full = sum(classroom.max_points(ASSIGNMENT).values())
    scores = gradebook(postgres, ASSIGNMENT, students=set(probes().values()))
    assert sum(row[0] or 0 for key, row in scores.items() if key[2] == "grade") == full * SHARDS


def test_merged_shards_give_feedback_and_export_to_everyone(sharded, postgres):
    _, course, shards, _ = sharded
    everyone = submitted_students(course, ASSIGNMENT)
    output = finished(run(["course", "merge", ASSIGNMENT, *shards, "--root", course], course, postgres))
    graded = sorted(set(everyone) - {classroom.BROKEN})
    assert f"Merged the autograded notebooks of {len(graded)} student(s) from {SHARDS} shard folder(s)" in output
    assert f"已把 {SHARDS} 个分片目录中 {len(graded)} 名学生的自动评分 notebook 合并到" in output
    assert sorted(p.name for p in (course / "autograded").iterdir()) == graded
    # (the written answers wait for a person: feedback that shows them as 0, as `course demo` sends)
    finished(run(["nbgrader", "generate_feedback", ASSIGNMENT, "--RequireHandGrading.allow_ungraded=True"],
                 course, postgres))
    assert sorted(p.parent.parent.name for p in (course / "feedback").glob(f"*/{ASSIGNMENT}/{ASSIGNMENT}.html")) \
        == graded
    finished(run(["nbgrader", "export"], course, postgres))
    with open(course / "grades.csv", newline="") as exported:
        rows = [row for row in csv.DictReader(exported) if row["assignment"] == ASSIGNMENT]
    assert sorted(row["student_id"] for row in rows) == sorted(everyone)
    solution = next(row for row in rows if row["student_id"] == "solution")
    assert float(solution["raw_score"]) == sum(classroom.max_points(ASSIGNMENT).values())


SLURM_PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """Environment variables for a one-node Slurm cluster of this machine: its own MUNGE daemon (own key and
    socket), slurmctld and slurmd in the foreground, on free ports, all stopped when the module ends."""
    missing = [p for p in SLURM_PROGRAMS if not shutil.which(p, path=f"/usr/sbin:{os.environ['PATH']}")]
    if missing or os.geteuid() != 0:
        system_tools.missing(f"a one-node Slurm cluster ({'no ' + ', '.join(missing) if missing else 'not root'})",
                             "`make slurm`: Debian's slurm-wlm and munge, as root", "COURSE_SKIP_SLURM")
    folder = Path(tempfile.mkdtemp(prefix="course-slurm-"))  # short: MUNGE's socket path
    key, socket_path, config = folder / "munge.key", folder / "munge.socket", folder / "slurm.conf"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    (folder / "state").mkdir()
    (folder / "spool").mkdir()
    memory_mib = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20 * 9 // 10  # slurmd checks it
    config.write_text(f"""\
ClusterName=course
SlurmctldHost={socket.gethostname()}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={socket_path}
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
NodeName=course-node NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory={memory_mib} State=UNKNOWN
PartitionName=grading Nodes=course-node Default=YES MaxTime=INFINITE State=UP
""")
    env = {**os.environ, "SLURM_CONF": str(config),
           "PATH": f"{BIN}{os.pathsep}/usr/sbin{os.pathsep}{os.environ['PATH']}"}
    daemons = []
    try:
        for command in (["munged", "-F", "-f", f"--socket={socket_path}", f"--key-file={key}",
                         f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log",
                         f"--seed-file={folder}/munged.seed"],
                        ["slurmctld", "-D", "-i"], ["slurmd", "-D", "-N", "course-node"]):
            daemons.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
            time.sleep(1)
        deadline = time.monotonic() + 60
        while "idle" not in subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True,
                                           text=True).stdout:
            assert time.monotonic() < deadline, "the Slurm node never became idle: " + "".join(
                (folder / log).read_text() for log in ("slurmctld.log", "slurmd.log") if (folder / log).exists())
            time.sleep(1)
        yield env
    finally:
        for daemon in reversed(daemons):
            daemon.terminate()
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        shutil.rmtree(folder, ignore_errors=True)


def test_slurm_array_grades_the_class_into_postgresql(slurm, postgres, demo, course_folder):
    """deploy/slurm/grade-array.sbatch submitted as a two-task array to a real (one-node) Slurm cluster,
    then `course merge`: every student graded once, into PostgreSQL, with the single run's grades."""
    import psycopg

    single = demo(ASSIGNMENT).graded
    students = ["solution", "mistakes-3"]  # one in each shard
    with psycopg.connect(postgres.replace("+psycopg", "").replace("/gradebook", "/postgres"),
                         autocommit=True) as server:
        server.execute("CREATE DATABASE slurmbook")
    db_url = postgres.replace("/gradebook", "/slurmbook")
    course = course_folder(ASSIGNMENT, "slurm")
    for student in students:
        shutil.copytree(single.root / "submitted" / student, course / "submitted" / student)
    finished(run(["nbgrader", "generate_assignment", ASSIGNMENT, "--force"], course, db_url))
    script = Path(__file__).resolve().parents[2] / "deploy" / "slurm" / "grade-array.sbatch"
    started = time.monotonic()
    done = subprocess.run(["sbatch", "--wait", "--array=0-1", "--cpus-per-task=1", "--mem=1G",
                           str(script), ASSIGNMENT], cwd=course, env={**slurm, "COURSE_DB_URL": db_url},
                          capture_output=True, text=True, timeout=900)
    logs = "".join(log.read_text() for log in sorted(course.glob("course-grade-*.log")))
    assert done.returncode == 0, done.stdout + done.stderr + logs
    print(f"Slurm array of 2 tasks: {time.monotonic() - started:.1f} s")
    assert len(list(course.glob("course-grade-*.log"))) == 2
    assert sorted(shard_of(s, 2) for s in students) == [1, 2]
    assert "Shard 1/2: 1 of the 2 student(s)" in logs and "Shard 2/2: 1 of the 2 student(s)" in logs, logs
    finished(run(["course", "merge", ASSIGNMENT, *sorted((course / "shards").iterdir())], course, db_url))
    assert sorted(p.name for p in (course / "autograded").iterdir()) == sorted(students)
    expected = gradebook(settings.gradebook_url(settings.load(single.root)), ASSIGNMENT, students=set(students))
    assert gradebook(db_url, ASSIGNMENT) == expected
