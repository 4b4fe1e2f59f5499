"""The course's settings: its nbgrader_config.py, loaded once per `course` command and passed down.

nbgrader loads that file itself in every `nbgrader` command; the course's own commands (`course grade`,
`course setup`, `course status`) load it here, once, as nbgrader would in the course folder, and hand
the same Config to everything that needs it: the gradebook queries and every worker's NbGraderAPI.
"""
import os
from pathlib import Path

from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

# The environment variables that override a setting, each read here and nowhere else (README, "Environment
# variables"): variable → (section, setting, value from the variable's text). Grading kernels never see them.
OVERRIDES = {
    "COURSE_DB_URL": ("CourseDirectory", "db_url", str),  # a shared gradebook (README, "Beyond one machine")
    "COURSE_NO_SANDBOX": ("Sandbox", "enabled", lambda given: given in ("", "0")),  # 1: grade without the sandbox
    "COURSE_BWRAP": ("Sandbox", "bwrap", str),  # another bwrap than the one on PATH
}
BUSY_TIMEOUT_S = 300  # a worker waits this long for SQLite's lock instead of failing "database is locked"


def load(root: Path) -> Config:
    """nbgrader_config.py of the course folder `root`, with the gradebook URL every part of the command
    uses: the configured one (COURSE_DB_URL, say), or the course's SQLite file with a busy timeout, so
    that concurrent workers wait for each other's writes."""
    root = Path(root).resolve()
    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    config.CourseDirectory.root = str(root)
    configured = config.CourseDirectory.get("db_url", "")
    if not configured or configured.startswith("sqlite"):
        # another database (PostgreSQL for a cluster, see the README) handles concurrent writers itself
        # (a relative SQLite path is taken from the course folder, wherever the command runs)
        path = root / (configured.removeprefix("sqlite:///").split("?")[0] if configured else "gradebook.db")
        config.CourseDirectory.db_url = f"sqlite:///{path}?timeout={BUSY_TIMEOUT_S}"
    return config


def gradebook_url(config: Config) -> str:
    return config.CourseDirectory.db_url


def from_environment(config: Config, environ=None) -> Config:
    """The settings that OVERRIDES' variables override, where they are set (not empty): called by
    nbgrader_config.py, so that every nbgrader and `course` command reads them the same way."""
    environ = os.environ if environ is None else environ
    for variable, (section, name, value) in OVERRIDES.items():
        if environ.get(variable):
            config[section][name] = value(environ[variable])
    return config
