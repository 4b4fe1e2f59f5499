"""nbgrader configuration for students: `nbgrader validate`, `fetch_assignment`, `submit`, `fetch_feedback`.

nbgrader reads this file when it runs in this folder (JupyterLab's Validate button too, when
`make lab` started JupyterLab here). On a shared machine or JupyterHub the system-wide configuration
(/etc/jupyter/nbgrader_config.py) says the same about the course and its exchange.
"""
c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "torch-to"
c.Exchange.root = "/srv/nbgrader/exchange"

# Validation runs your notebook as the grader will: the same time limit per cell, and the same start-up
# that remembers the real PyTorch functions, so replacing them is reported here as in grading.
# Unlike the grader, it runs your kernel without a sandbox: it is your own code on your own machine.
from autograder.kernel import CELL_TIMEOUT_S, kernel_arguments  # noqa: E402

c.Execute.timeout = CELL_TIMEOUT_S
c.Execute.interrupt_on_timeout = True
c.Execute.extra_arguments = kernel_arguments()  # the grader's limits of memory and CPU time
# Diagnostics shown whole: nbgrader's default cuts every line at 90 characters, the fix at its end with it.
c.Validator.width = 500

# The kernel talks to nbgrader over local sockets (IPC) rather than TCP on this machine: ipykernel
# warns about unencrypted TCP on every run, and a local socket is readable by its owner only.
# Windows has no IPC transport: TCP there, as Jupyter's default.
import os  # noqa: E402

if os.name != "nt":
    c.KernelManager.transport = "ipc"
