"""JupyterHub for the course on one machine (README, "JupyterHub"):
`sudo /opt/torch-to/bin/jupyterhub -f deploy/jupyterhub/jupyterhub_config.py` (the course
environment's own jupyterhub, from `make shared-install PREFIX=/opt/torch-to`: sudo's PATH does not hold it).

Every user logs in with their Unix account and gets their own JupyterLab, running as that user
(LocalProcessSpawner), in the course's environment. Roles follow nbgrader's JupyterHub set-up: the
instructors are the group `formgrade-torch-to` and keep nbgrader's instructor tools (formgrader, Create
Assignment) in their JupyterLab; everybody else is a student, whose JupyterLab starts with the
student configuration (deploy/student/etc/jupyter: those tools off; fetch, submit and validate on).
Assignments travel through nbgrader's exchange on this machine (deploy/exchange/setup-exchange.sh
installs it and /etc/jupyter/nbgrader_config.py, which every user's nbgrader reads).

Edit INSTRUCTORS and STUDENTS (Unix user names), INSTRUCTOR_COURSE_FOLDER, COURSE_ENV (the course's environment, readable by
every user) and run the hub as root, behind HTTPS (https://jupyterhub.readthedocs.io/en/stable/tutorial/getting-started/security-basics.html).
tests/system/test_jupyterhub.py starts this configuration on loopback with a dummy authenticator.
"""
import os
import shutil
from pathlib import Path

c = get_config()  # noqa: F821  (provided by JupyterHub when it loads this file)

COURSE = "torch-to"
INSTRUCTORS = {"teacher"}
STUDENTS = {"student1", "student2"}
COURSE_ENV = Path("/opt/torch-to")  # `make shared-install PREFIX=/opt/torch-to`: every user can run it
# the servers' Jupyter configuration: the shared environment's copy (readable by every user, while the
# checkout stays private to the instructor), else the checkout's
SHARED = COURSE_ENV / "share" / "torch-to"
HERE = Path(__file__).resolve().parent
STUDENT_JUPYTER_CONFIG = SHARED / "student-jupyter" if SHARED.is_dir() else HERE.parent / "student" / "etc" / "jupyter"
INSTRUCTOR_COURSE_FOLDER = "~/torch-to"  # each instructor's course folder (`course setup` was run there)
# nbgrader reads the course there
INSTRUCTOR_JUPYTER_CONFIG = SHARED / "instructor-jupyter" if SHARED.is_dir() else HERE / "instructor"

c.JupyterHub.bind_url = "http://127.0.0.1:8000"  # put a TLS-terminating proxy in front
# JupyterHub's proxy: `make proxy` installs it into the checkout's build/node/ when npm has not put it on PATH
LOCAL_PROXY = Path(__file__).resolve().parents[2] / "build" / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
if not shutil.which("configurable-http-proxy") and LOCAL_PROXY.exists():
    c.ConfigurableHTTPProxy.command = [str(LOCAL_PROXY)]
c.JupyterHub.authenticator_class = "pam"         # Unix accounts
c.Authenticator.allowed_users = INSTRUCTORS | STUDENTS
c.Authenticator.admin_users = INSTRUCTORS
c.JupyterHub.spawner_class = "jupyterhub.spawner.LocalProcessSpawner"
c.Spawner.cmd = [str(COURSE_ENV / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
# Each server starts in its user's login shell (JupyterHub's own option for this), so that it has the
# environment the user set there: a student's `export COURSE_CHINESE=zh-hant` in ~/.profile reaches her
# server and its kernels (README, "JupyterHub"), as it does her terminal; /etc/profile.d/torch-to.sh, from
# `make shared-install`, is read there too.
c.LocalProcessSpawner.shell_cmd = ["bash", "-l", "-c"]

# nbgrader's group names for one course: instructors (formgrade-COURSE) and students (nbgrader-COURSE)
INSTRUCTOR_GROUP, STUDENT_GROUP = f"formgrade-{COURSE}", f"nbgrader-{COURSE}"
c.JupyterHub.load_groups = {INSTRUCTOR_GROUP: {"users": sorted(INSTRUCTORS)},
                            STUDENT_GROUP: {"users": sorted(STUDENTS)}}


def per_role_configuration(spawner):
    """Students' JupyterLab reads the student configuration first: no formgrader, no Create Assignment.
    (A student who edits their own configuration can turn them back on, but they work only on the
    student's own files: grading happens in the instructors' servers.) An instructor's JupyterLab starts
    on their course folder, and its nbgrader reads the course's own nbgrader_config.py there
    (deploy/jupyterhub/instructor/): the hub starts every server in the home folder otherwise."""
    configured = spawner.environment.get("JUPYTER_CONFIG_PATH", os.environ.get("JUPYTER_CONFIG_PATH"))
    if INSTRUCTOR_GROUP in {group.name for group in spawner.user.groups}:
        spawner.notebook_dir, first = INSTRUCTOR_COURSE_FOLDER, INSTRUCTOR_JUPYTER_CONFIG
    else:
        first = STUDENT_JUPYTER_CONFIG
    # a new dict: the configured one is shared by every user's spawner
    spawner.environment = {**spawner.environment, "JUPYTER_CONFIG_PATH": os.pathsep.join(
        filter(None, [str(first), configured]))}


c.Spawner.pre_spawn_hook = per_role_configuration
