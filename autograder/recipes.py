"""What one lesson builds and a later lesson uses again, imported there (as d2l's notebooks import `d2l`),
so that each cell of the later lesson shows only its own idea.

* `amp_dtype_for` is taught, line by line, in lesson 9 ("Which 16-bit type, on which device"); lesson 10
  imports it. tests/unit/test_practice.py keeps the two the same.
* `seconds` is lesson 7's timer (its cell passes the lesson's `device` and `time` to the statement too);
  lesson 8 imports it.
* `run_ddp` starts a lesson's DDP script with torchrun on the loopback interface (lessons 11 and 12).
"""
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import torch


def amp_dtype_for(device):
    """16-bit dtype for torch.autocast on `device` / `device` 上 torch.autocast 使用的 16 位数据类型"""
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported(including_emulation=False) else torch.float16
    if device.type == "mps":
        return torch.float16
    if device.type == "cpu":
        return torch.bfloat16
    raise ValueError(f"no 16-bit autocast dtype for {device.type!r} / 没有适用于 {device.type!r} 的 16 位 autocast 数据类型")


def seconds(stmt, min_run_time=0.05, **names):
    """Median run time of `stmt` in seconds. / `stmt` 的中位运行时间（秒）。"""
    from torch.utils import benchmark

    timer = benchmark.Timer(stmt=stmt, globals={"torch": torch, **names})
    return timer.blocked_autorange(min_run_time=min_run_time).median


def free_loopback_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))          # port 0: the OS picks a free one / 端口 0：由系统挑选空闲端口
        return s.getsockname()[1]


def run_ddp(script, nproc=2, extra_env=None):
    """Run the file `script` with torchrun on `nproc` processes and return what they printed.

    The processes talk over the loopback interface only: the rendezvous address is 127.0.0.1, on a free
    port, and GLOO_SOCKET_IFNAME names the loopback interface. Raises RuntimeError, with the end of the
    processes' stderr, when the run fails, so that a broken run never passes for a good one.
    用 torchrun 在 `nproc` 个进程上运行文件 `script`，返回它们打印的内容；运行失败时抛出 RuntimeError，附上各进程 stderr 的末尾。
    """
    env = dict(os.environ, OMP_NUM_THREADS="1", **(extra_env or {}))
    try:
        loopback = next((name for _, name in socket.if_nameindex() if name.startswith("lo")), None)
    except OSError:
        loopback = None
    if loopback:
        env["GLOO_SOCKET_IFNAME"] = loopback
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
               "--master_addr=127.0.0.1", f"--master_port={free_loopback_port()}", str(script)]
    # torchrun leaves a log folder in the temporary folder at every run (torchelastic_*): give the run one
    # of its own, removed after it, so a lesson run again and again leaves nothing behind
    # torchrun 每次运行都会在临时目录里留下一个日志目录（torchelastic_*）：给它一个专用目录，运行后删除
    with tempfile.TemporaryDirectory(prefix="ddp-run-") as scratch:
        result = subprocess.run(command, cwd=Path(script).parent, env=dict(env, TMPDIR=scratch),
                                capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"DDP run failed (exit code {result.returncode}) / "
                           f"DDP 运行失败（退出码 {result.returncode}）\n{result.stderr[-3000:]}")
    return result.stdout
