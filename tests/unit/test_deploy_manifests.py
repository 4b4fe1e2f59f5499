"""The cluster files of README, "Beyond one machine" stay valid: the Slurm array script and the Kubernetes
Indexed Job use only `course` options that exist, and are well-formed. (tests/system/test_postgres.py submits the
Slurm script to a real one-node cluster where Slurm is installed.)"""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from course.cli import main


ROOT = Path(__file__).resolve().parents[2]
SBATCH = ROOT / "deploy" / "slurm" / "grade-array.sbatch"
JOB = ROOT / "deploy" / "k8s" / "grade-job.yaml"
# `course SUBCOMMAND ...` where a shell would run it (also in comments: they are the instructions)
COURSE_CALL = re.compile(r"(?:^|[\s;&|(\"])course (\w+)([^\n;&|]*)", re.M)


def course_calls(text: str) -> list[tuple[str, list[str]]]:
    return [(sub, re.findall(r"(?<!\S)(--[a-z][a-z-]*)", rest)) for sub, rest in COURSE_CALL.findall(text)]


def documented_options(subcommand, capsys) -> set[str]:
    with pytest.raises(SystemExit):
        main([subcommand, "--help"])
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", capsys.readouterr().out))


def job_manifest() -> dict:
    return yaml.safe_load(JOB.read_text("utf-8"))


def job_command() -> str:
    container, = job_manifest()["spec"]["template"]["spec"]["containers"]
    return "\n".join(container["command"] + container.get("args", []))


@pytest.mark.parametrize("text", [SBATCH.read_text("utf-8"), job_command()], ids=["slurm", "kubernetes"])
def test_cluster_files_use_only_documented_course_options(text, capsys):
    calls = course_calls(text)
    assert ("grade", ["--shard", "--jobs", "--root"]) in calls, calls
    for subcommand, options in calls:
        if options:  # ("course folder …" in a comment is prose)
            assert set(options) <= documented_options(subcommand, capsys), (subcommand, options)


def test_the_option_check_can_fail(capsys):
    calls = course_calls('exec course grade "$a" --shards 1/2 --root x')
    assert not set(calls[0][1]) <= documented_options("grade", capsys)


def test_slurm_script_is_valid_bash():
    done = subprocess.run(["bash", "-n", str(SBATCH)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "#SBATCH" in SBATCH.read_text() and os.access(SBATCH, os.X_OK)


def test_slurm_task_grades_its_shard_in_its_own_copy(tmp_path):
    """Array task 2 of --array=0-7 runs `course grade ASSIGNMENT --shard 3/8` in shards/shard-3, a copy of
    the course's configuration, source and submissions (a stand-in `course` records what it was asked)."""
    course = tmp_path / "course"
    for path in ["source/a1/a1.ipynb", "submitted/alice/a1/a1.ipynb", "nbgrader_config.py"]:
        (course / path).parent.mkdir(parents=True, exist_ok=True)
        (course / path).write_text(path)
    stand_in = tmp_path / "bin" / "course"
    stand_in.parent.mkdir()
    stand_in.write_text('#!/bin/sh\necho "$@" > "$STAND_IN_LOG"\n')
    stand_in.chmod(0o755)
    env = {"PATH": f"{stand_in.parent}:{os.environ['PATH']}", "STAND_IN_LOG": str(tmp_path / "called"),
           "COURSE_DB_URL": "postgresql+psycopg://grader@db/gradebook", "SLURM_ARRAY_TASK_ID": "2",
           "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "8", "SLURM_CPUS_PER_TASK": "4"}
    done = subprocess.run(["bash", str(SBATCH), "a1", str(course)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    work = course / "shards" / "shard-3"
    assert (tmp_path / "called").read_text().split() == ["grade", "a1", "--shard", "3/8", "--jobs", "4",
                                                          "--root", str(work)]
    assert sorted(p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file()) == [
        "nbgrader_config.py", "source/a1/a1.ipynb", "submitted/alice/a1/a1.ipynb"]
    without_db = {k: v for k, v in env.items() if k != "COURSE_DB_URL"}
    done = subprocess.run(["bash", str(SBATCH), "a1", str(course)], env=without_db, capture_output=True, text=True)
    assert done.returncode != 0 and "COURSE_DB_URL" in done.stderr


def test_kubernetes_job_has_what_kubernetes_requires():
    job = job_manifest()
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job" and job["metadata"]["name"]
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] in ("Never", "OnFailure")
    container, = pod["containers"]
    assert container["name"] and container["image"] and container["command"]
    env = {e["name"]: e for e in container["env"]}
    # one index per shard: `--shard I/$SHARDS` must cover every index, all of them at once
    assert spec["completions"] == spec["parallelism"] == int(env["SHARDS"]["value"])
    assert env["COURSE_DB_URL"]["valueFrom"]["secretKeyRef"]  # the password stays in a Secret
    mounts = {m["name"] for m in container["volumeMounts"]}
    assert mounts <= {v["name"] for v in pod["volumes"]}
    command = job_command()
    assert '--shard "$shard/$SHARDS"' in command and "shard=$((JOB_COMPLETION_INDEX + 1))" in command


@pytest.mark.skipif(not shutil.which("sh"), reason="no sh")
def test_kubernetes_command_is_valid_shell():
    container, = job_manifest()["spec"]["template"]["spec"]["containers"]
    assert container["command"][:2] == ["/bin/sh", "-c"]
    done = subprocess.run(["sh", "-n", "-c", container["command"][2]], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
