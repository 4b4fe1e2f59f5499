"""The kernel manager of every grading kernel: sandboxed, and started as a new process or forked.

It stands above both ways of starting a kernel, a new process in a new sandbox (sandbox.py) and a
fork from a warm server into one (forkserver.py, whose provisioner extends the sandbox's), so that
neither module imports the other's user.
"""
import uuid

from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool

from . import sandbox
from .forkserver import ForkedKernelProvisioner
from .sandbox import SandboxedProvisioner


class GradingKernelManager(AsyncKernelManager):
    """The kernel manager of nbgrader's Execute preprocessors: every kernel sandboxed, started as a
    new process, or forked from this process's warm fork server (`fork_server`: the course's
    nbgrader_config.py sets it, `course grade --no-fork-server` unsets it)."""

    fork_server = Bool(False, config=True, help="Fork each kernel from this process's warm fork server "
                       "(course/kernels/forkserver.py) rather than start it as a new process.")

    async def _async_pre_start_kernel(self, **kw):
        if self.provisioner is None:
            if self.fork_server:
                provisioner_class = ForkedKernelProvisioner
            else:
                provisioner_class = SandboxedProvisioner
            self.kernel_id = self.kernel_id or kw.pop("kernel_id", str(uuid.uuid4()))
            self.provisioner = provisioner_class(kernel_id=self.kernel_id, kernel_spec=self.kernel_spec,
                                                 parent=self)
        return await super()._async_pre_start_kernel(**kw)


def use_for_nbgrader(group_memory_bytes=None, group_processes=None):
    """Make nbgrader's own Execute preprocessor (the one `nbgrader validate` runs; nbgrader does not
    let its list be configured) start its kernels with GradingKernelManager. Called from
    nbgrader_config.py; autograde's SafeExecute asks for it directly. The limits are those of each
    sandbox as a whole (its cgroup)."""
    from nbgrader.preprocessors import execute

    sandbox.GROUP_MEMORY_BYTES = group_memory_bytes or sandbox.GROUP_MEMORY_BYTES
    sandbox.GROUP_PROCESSES = group_processes or sandbox.GROUP_PROCESSES

    execute.AsyncKernelManager = GradingKernelManager
