"""nbgrader configuration of an instructor's JupyterLab on the hub (deploy/jupyterhub/jupyterhub_config.py
puts this folder on the instructor's JUPYTER_CONFIG_PATH).

The hub starts every server in its user's home, and nbgrader reads the nbgrader_config.py of the folder
it runs in: the formgrader would find no course there. The hub starts an instructor's server on the
course folder (JUPYTERHUB_ROOT_DIR), so the course is that folder, with its own settings (the sandbox,
the hidden-test removal, the hand-grading hold)."""
import os
from pathlib import Path

c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)

course = Path(os.environ.get("JUPYTERHUB_ROOT_DIR") or os.getcwd()).expanduser()
c.CourseDirectory.root = str(course)
if (course / "nbgrader_config.py").exists():
    load_subconfig(str(course / "nbgrader_config.py"))  # noqa: F821
