"""The course on a real JupyterHub (deploy/jupyterhub/jupyterhub_config.py), on loopback.

The hub runs the shipped configuration, changed only where a test must (ports, a dummy authenticator,
temporary folders). An instructor and a student, real Unix users, each get their own JupyterLab server
through LocalProcessSpawner. The student fetches and submits the assignment through their server's
nbgrader API behind the hub's proxy; the instructor collects it through the formgrader's API in theirs;
the student's server has no formgrader. Every process started here is ended, also after a failure.
"""
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

from course import classroom
from support import system_tools, unix_users
from support.paths import BIN, free_port, with_bin_on_path

pytestmark = pytest.mark.build_independent  # the hub, its spawner and its proxy; no PyTorch build changes them: .ci/run runs it once


ROOT = classroom.ROOT
ASSIGNMENT = "a1_tensor_to"
COURSE = "torch-to"
SHIPPED = ROOT / "deploy" / "jupyterhub" / "jupyterhub_config.py"


def proxy_command() -> str:
    found = shutil.which("configurable-http-proxy") or ROOT / "build" / "node" / "node_modules" / ".bin" / \
        "configurable-http-proxy"
    if not Path(found).exists():
        system_tools.missing("configurable-http-proxy", "make proxy: npm install", "COURSE_SKIP_JUPYTERHUB")
    return str(found)




class Hub:
    def __init__(self, url, token, users):
        self.url, self.users = url, users
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"token {token}"

    def api(self, method, path, **kwargs):
        response = self.session.request(method, f"{self.url}/hub/api{path}", timeout=60, **kwargs)
        assert response.status_code < 400, f"{method} {path}: {response.status_code} {response.text}"
        return response

    def start_server(self, user):
        self.api("POST", f"/users/{user}/server")

    def wait_ready(self, user, timeout=240):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            server = self.api("GET", f"/users/{user}").json().get("servers", {}).get("")
            if server and server.get("ready"):
                return
            time.sleep(0.5)
        pytest.fail(f"{user}'s server did not start / {user} 的服务器未能启动")

    def server(self, method, user, path, **kwargs):
        """A request to `user`'s own JupyterLab server, through the hub's proxy, as the hub API does it."""
        return self.session.request(method, f"{self.url}/user/{user}{path}", timeout=120, **kwargs)


@pytest.fixture(scope="module")
def hub():
    unix_users.require_root()
    proxy_command()  # the test is skipped without it; the shipped configuration finds it (build/node/)
    top = unix_users.world_readable_folder("course-hub-")
    process = None
    try:
        (top / "homes").mkdir(mode=0o755)
        config_dir, exchange = top / "etc-jupyter", top / "exchange"
        with unix_users.users(["teacher", "student"], top / "homes") as users:
            teacher, student = users["teacher"], users["student"]
            done = subprocess.run([ROOT / "deploy" / "exchange" / "setup-exchange.sh", teacher], capture_output=True,
                                  text=True, env={**os.environ, "EXCHANGE_ROOT": str(exchange),
                                                  "JUPYTER_SYSTEM_CONFIG": str(config_dir)})
            assert done.returncode == 0, done.stdout + done.stderr
            python = unix_users.shared_python(top)
            env = {"JUPYTER_CONFIG_PATH": str(config_dir),  # stands in for /etc/jupyter
                   "PATH": f"{python.parent}:/usr/local/bin:/usr/bin:/bin"}  # the course environment's commands
            release(teacher, python, env)
            # every server starts in its user's login shell: what /etc/profile.d/torch-to.sh (make shared-install)
            # does there, the course environment on PATH; and the student's choice of 繁體, in her ~/.profile
            for user, profile in [(teacher, ""), (student, "export COURSE_CHINESE=zh-hant\n")]:
                profile = f'PATH="{python.parent}:$PATH"; export PATH\n' + profile
                done = unix_users.run_as(user, ["sh", "-c", f"printf %s {shlex.quote(profile)} >> ~/.profile"],
                                         cwd=unix_users.home_of(user))
                assert done.returncode == 0, done.stderr
            token, port = secrets.token_hex(16), free_port()
            (top / "jupyterhub_config.py").write_text(f"""
c = get_config()
load_subconfig({str(SHIPPED)!r})
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{free_port()}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{free_port()}"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = {{{teacher!r}, {student!r}}}
c.Authenticator.admin_users = set()
c.JupyterHub.load_groups = {{"formgrade-{COURSE}": {{"users": [{teacher!r}]}},
                             "nbgrader-{COURSE}": {{"users": [{student!r}]}}}}
c.Spawner.cmd = [{str(python)!r}, "-m", "jupyterhub.singleuser"]
c.Spawner.environment = {env!r}
c.Spawner.start_timeout = c.Spawner.http_timeout = 240
c.JupyterHub.db_url = "sqlite:///{top}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{top}/jupyterhub_cookie_secret"
c.JupyterHub.services = [{{"name": "course-test", "api_token": {token!r}}}]
c.JupyterHub.load_roles = [{{"name": "course-test", "services": ["course-test"],
                            "scopes": ["admin:users", "admin:servers", "access:servers", "read:users"]}}]
""")
            log = open(top / "jupyterhub.log", "w")
            process = subprocess.Popen([BIN / "jupyterhub", "-f", top / "jupyterhub_config.py"],
                                       cwd=top, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                       env=with_bin_on_path())
            wait_for(f"http://127.0.0.1:{port}/hub/api", process, top / "jupyterhub.log")
            yield Hub(f"http://127.0.0.1:{port}", token, users)
    finally:
        stop(process, top)
        subprocess.run(["rm", "-rf", str(top)])


def course_folder(teacher) -> Path:
    """The instructor's course folder, where the shipped configuration expects it (INSTRUCTOR_COURSE_FOLDER)."""
    return unix_users.home_of(teacher) / "torch-to"


# the course's own nbgrader_config.py: it leaves a mark each time nbgrader reads it
COURSE_CONFIG = "c = get_config()\nopen(__file__.replace('nbgrader_config.py', 'config-read'), 'a').write('read\\n')\n"


def release(teacher, python, env):
    """The instructor's course folder is ~/torch-to; the assignment is released before the hub starts."""
    course = course_folder(teacher)
    for command in (["mkdir", "-p", course / "release", course / "source"],
                    ["cp", "-R", ROOT / "release" / ASSIGNMENT, course / "release"],
                    ["cp", "-R", ROOT / "source" / ASSIGNMENT, course / "source"],
                    ["sh", "-c", f"printf %s {shlex.quote(COURSE_CONFIG)} > nbgrader_config.py"],
                    [python, "-m", "nbgrader", "release_assignment", ASSIGNMENT], ["rm", "-f", "config-read"]):
        done = unix_users.run_as(teacher, command, cwd=course if command[0] != "mkdir" else unix_users.home_of(teacher),
                                 env=env)
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"


def wait_for(url, process, log, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"JupyterHub exited / JupyterHub 已退出:\n{log.read_text()}"
        try:
            if requests.get(url, timeout=5).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.5)
    pytest.fail(f"JupyterHub did not start / JupyterHub 未能启动:\n{log.read_text()}")


def stop(process, top):
    """The hub stops the servers it spawned and its proxy on SIGTERM; whatever is left is killed by id."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    proxy_pid = top / "jupyterhub-proxy.pid"
    if proxy_pid.exists():
        try:
            os.kill(int(proxy_pid.read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass  # already stopped by the hub


@pytest.fixture(scope="module")
def servers(hub):
    for user in hub.users.values():
        hub.start_server(user)
    for user in hub.users.values():
        hub.wait_ready(user)
    return hub


def test_student_fetches_and_submits_and_the_instructor_collects(servers):
    hub, teacher, student = servers, servers.users["teacher"], servers.users["student"]
    form = {"course_id": COURSE, "assignment_id": ASSIGNMENT}
    listed = hub.server("GET", student, "/assignments", params={"course_id": COURSE})
    assert listed.status_code == 200 and listed.json()["success"], listed.text
    assert [a["assignment_id"] for a in listed.json()["value"] if a["status"] == "released"] == [ASSIGNMENT]
    for action in ("fetch", "submit"):
        done = hub.server("POST", student, f"/assignments/{action}", data=form)
        assert done.status_code == 200 and done.json()["success"], f"{action}: {done.text}"
    fetched = unix_users.home_of(student) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert fetched.stat().st_uid == unix_users.home_of(student).stat().st_uid, "fetched as the student / 应以学生身份取回"
    collected = hub.server("POST", teacher, f"/formgrader/api/assignment/{ASSIGNMENT}/collect")
    assert collected.status_code == 200 and collected.json()["success"], collected.text
    submitted = classroom.notebook_path(course_folder(teacher), "submitted", ASSIGNMENT, student)
    assert submitted.read_bytes() == fetched.read_bytes(), (
        "the instructor did not collect the student's submission / 教师没有收到该学生的提交")


def test_the_instructors_formgrader_works_on_the_course_folder(servers):
    """The hub starts servers in the home folder; the instructor's formgrader still finds the course in
    ~/torch-to and reads its own nbgrader_config.py there."""
    hub, teacher = servers, servers.users["teacher"]
    listed = hub.server("GET", teacher, "/formgrader/api/assignments")
    assert listed.status_code == 200, listed.text
    assert ASSIGNMENT in [a["name"] for a in listed.json()], f"the formgrader lists / formgrader 列出: {listed.text}"
    assert (course_folder(teacher) / "config-read").exists(), (
        "the course's nbgrader_config.py was not read / 没有读取课程的 nbgrader_config.py")


def test_only_the_instructor_has_the_formgrader(servers):
    hub, teacher, student = servers, servers.users["teacher"], servers.users["student"]
    assert hub.server("GET", teacher, "/formgrader/api/status").status_code == 200, "instructor / 教师"
    assert hub.server("GET", student, "/formgrader/api/status").status_code == 404, (
        "students must not have the formgrader / 学生不应有 formgrader")
    assert hub.server("GET", student, "/assignments", params={"course_id": COURSE}).status_code == 200
    # the lab extensions too: JupyterLab's page tells the browser which extensions to leave out
    assert "@jupyter/nbgrader:formgrader" in disabled_lab_extensions(hub, student), "student / 学生"
    assert "@jupyter/nbgrader:formgrader" not in disabled_lab_extensions(hub, teacher), "instructor / 教师"


def disabled_lab_extensions(hub, user) -> list[str]:
    page = hub.server("GET", user, "/lab")
    assert page.status_code == 200, page.text
    data = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page.text, re.S)
    return json.loads(data.group(1)).get("disabledExtensions", [])


def server_environment(user) -> dict:
    """The environment of `user`'s single-user server process, as the kernel it starts inherits it."""
    import pwd

    uid = pwd.getpwnam(user).pw_uid
    for process in Path("/proc").glob("[0-9]*"):
        try:
            if process.stat().st_uid == uid and b"jupyterhub.singleuser" in (process / "cmdline").read_bytes():
                pairs = (process / "environ").read_bytes().split(b"\0")
                return dict(pair.decode().split("=", 1) for pair in pairs if b"=" in pair)
        except OSError:
            continue
    pytest.fail(f"no server process of {user} / 找不到 {user} 的服务器进程")


def test_a_students_chinese_choice_reaches_her_server(servers):
    """A 繁體 student sets COURSE_CHINESE=zh-hant in ~/.profile; the hub starts her server in her login shell,
    so every message of her kernels is 繁體 (issue 43: it stayed 简体). Others keep the default."""
    assert server_environment(servers.users["student"]).get("COURSE_CHINESE") == "zh-hant"
    assert "COURSE_CHINESE" not in server_environment(servers.users["teacher"])
