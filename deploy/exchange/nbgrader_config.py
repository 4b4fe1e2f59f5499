"""nbgrader configuration for every user of one shared machine: install as /etc/jupyter/nbgrader_config.py
(deploy/exchange/setup-exchange.sh does). Students and instructors then run plain `nbgrader fetch_assignment`,
`submit`, `fetch_feedback`, `release_assignment`, `collect` … without `--course` or `--Exchange.root`.

The instructor's own settings (stubs, time limits, sandbox, feedback) stay in the course folder's
nbgrader_config.py, which nbgrader reads after this file."""
c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "torch-to"
# nbgrader's file-system exchange: release_assignment puts the assignment here, submit leaves each
# submission here, collect and release_feedback read and write here (setup-exchange.sh creates it).
c.Exchange.root = "/srv/nbgrader/exchange"

# Students' `nbgrader validate` (and JupyterLab's Validate button) would cut every line of a diagnostic at
# nbgrader's default 90 characters, the fix at its end (`x = x.to(device)`) with it: the same width as the
# instructor's configuration.
c.Validator.width = 500

# Students' kernels talk to nbgrader over local sockets (IPC) rather than TCP, as grading kernels do:
# ipykernel warns about unencrypted TCP on every validate, and a local socket is its owner's alone.
import os  # noqa: E402

if os.name != "nt":
    c.KernelManager.transport = "ipc"
