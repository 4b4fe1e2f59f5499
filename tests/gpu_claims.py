"""Every claim the lessons make about CUDA, run for real: `python tests/gpu_claims.py`.

The lessons run on CPU runners, where CUDA-only cells are skipped visibly; this script is where those
claims are checked. The GPU CI job runs it (with COURSE_REQUIRE_CUDA=1, so a job without CUDA fails);
anyone can run it by hand. Each claim prints what the lesson says next to what this machine did, and
the script exits 1 on any contradiction. Claims that need only the CUDA *build* (not a GPU) also run on
the CUDA-build runner, whose machine has no GPU.
"""
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

CLAIMS = []


@dataclass
class Claim:
    lesson: str
    says: str
    needs: str          # "cuda": a CUDA device; "cuda-build": PyTorch built for CUDA, with or without a GPU
    check: Callable[[], tuple[bool, str]]  # → (holds, what was seen)

    def runnable(self) -> bool:
        return torch.cuda.is_available() if self.needs == "cuda" else torch.version.cuda is not None


def claim(lesson, says, needs="cuda"):
    def register(check):
        CLAIMS.append(Claim(lesson, says, needs, check))
        return check
    return register


# ------------------------------------------------------------------ lesson 1 · devices
@claim("1 · The build is not the machine",
       "with no usable CUDA device, current_accelerator() still names cuda; check_available=True gives None",
       needs="cuda-build")
def build_is_not_the_machine():
    probe = ("import torch; print(torch.accelerator.current_accelerator(), "
             "torch.accelerator.current_accelerator(check_available=True), torch.cuda.is_available())")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    seen = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                          timeout=120).stdout.strip()
    return seen == "cuda None False", seen


# ------------------------------------------------------------------ lessons 2 and 6 · non_blocking
@claim("2 · non_blocking; 6 · pinned memory",
       "a CUDA→CPU copy with non_blocking=True lands in pinned memory PyTorch allocates itself")
def device_to_host_lands_pinned():
    x = torch.ones(1024, device="cuda")
    y = x.to("cpu", non_blocking=True)
    torch.cuda.synchronize()
    return y.is_pinned(), f"is_pinned() = {y.is_pinned()}"


@claim("6 · The early-read race",
       "a non_blocking CUDA→CPU copy returns before the data has arrived; synchronising makes it correct")
def early_read_race():
    x = torch.zeros(1 << 20, device="cuda")
    torch.cuda._sleep(1_000_000_000)          # keep the stream busy for a while
    x.add_(1)
    y = x.to("cpu", non_blocking=True)
    arrived = torch.cuda.Event()
    arrived.record()
    early = arrived.query()                   # False: the copy is still queued behind the work
    torch.cuda.synchronize()
    correct = bool((y == 1).all())
    return (not early) and correct, f"done at return: {early}; correct after synchronize: {correct}"


@claim("6 · pinned memory", "pin_memory() returns a new, pinned copy; the original stays pageable")
def pin_memory_copies():
    x = torch.ones(16)
    pinned = x.pin_memory()
    holds = pinned.is_pinned() and not x.is_pinned() and pinned.data_ptr() != x.data_ptr()
    return holds, f"copy pinned: {pinned.is_pinned()}, original pinned: {x.is_pinned()}"


# ------------------------------------------------------------------ lesson 5 · checkpoints
def adam_checkpoint(map_location):
    import io

    model = nn.Linear(3, 2).cuda()
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 3, device="cuda")).sum().backward()
    optimizer.step()
    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)
    buffer.seek(0)
    resumed = torch.optim.Adam(model.parameters())
    resumed.load_state_dict(torch.load(buffer, map_location=map_location))
    state = resumed.state[model.weight]
    return state["step"].device, state["exp_avg"].device


@claim("5 · Optimizer state after loading",
       "with map_location='cpu', load_state_dict moves Adam's moment estimates to the parameter's device "
       "and leaves `step` on the CPU")
def adam_resume_from_cpu():
    step, moments = adam_checkpoint("cpu")
    return step.type == "cpu" and moments.type == "cuda", f"step: {step}, exp_avg: {moments}"


@claim("5 · Optimizer state after loading",
       "with map_location='cuda', Adam's `step` stays on the GPU where torch.load put it")
def adam_resume_onto_cuda():
    step, moments = adam_checkpoint("cuda")
    return step.type == "cuda" and moments.type == "cuda", f"step: {step}, exp_avg: {moments}"


# ------------------------------------------------------------------ lesson 7 · autocast on CUDA
AUTOCAST_TABLE = {  # op → dtype under torch.autocast("cuda", dtype=torch.float16)
    "linear": torch.float16,
    "matmul": torch.float16,
    "softmax": torch.float32,
    "layer_norm": torch.float32,
    "sum": torch.float32,
}


@claim("7 · autocast on CUDA", "which dtype each op produces under float16 autocast: " +
       ", ".join(f"{op} → {str(dtype).removeprefix('torch.')}" for op, dtype in AUTOCAST_TABLE.items()))
def autocast_dtype_table():
    layer = nn.Linear(4, 4).cuda()
    x = torch.randn(2, 4, device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        logits = layer(x)
        seen = {
            "linear": logits.dtype,
            "matmul": (x @ x.T).dtype,
            "softmax": torch.softmax(logits, dim=-1).dtype,
            "layer_norm": nn.functional.layer_norm(logits, (4,)).dtype,
            "sum": logits.sum().dtype,
        }
    wrong = {op: dtype for op, dtype in seen.items() if dtype != AUTOCAST_TABLE[op]}
    return not wrong, ", ".join(f"{op} → {str(d).removeprefix('torch.')}" for op, d in seen.items())


@claim("7 · bfloat16", "current NVIDIA GPUs support bfloat16 (torch.cuda.is_bf16_supported())")
def bf16_supported():
    supported = torch.cuda.is_bf16_supported()
    return supported, f"is_bf16_supported() = {supported}"


# ------------------------------------------------------------------ lesson 9 · errors
@claim("9 · Reading a device-mismatch error",
       "a linear layer on CUDA fed a CPU batch: 'Expected all tensors to be on the same device, but got "
       "mat1 is on cpu, different from other tensors on cuda:0 (when checking argument in method "
       "wrapper_CUDA_addmm)'")
def linear_mismatch_message():
    try:
        nn.Linear(3, 2).cuda()(torch.randn(4, 3))
    except RuntimeError as error:
        text = str(error)
        expected = ("Expected all tensors to be on the same device, but got mat1 is on cpu, different from "
                    "other tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)")
        return text == expected, text
    return False, "no error"


@claim("9 · Reading a device-mismatch error",
       "an element-wise op: 'Expected all tensors to be on the same device, but found at least two devices'")
def elementwise_mismatch_message():
    try:
        torch.ones(2, device="cuda") + torch.ones(2)
    except RuntimeError as error:
        return "but found at least two devices" in str(error), str(error)
    return False, "no error"


@claim("1 · meta; 9 · mismatches", "a 0-dim CPU tensor mixes with a CUDA tensor without error")
def zero_dim_cpu_scalar_mixes():
    result = torch.ones(2, device="cuda") + torch.tensor(1.0)
    return result.device.type == "cuda", f"result on {result.device}"


def main() -> int:
    required = os.environ.get("COURSE_REQUIRE_CUDA", "") not in ("", "0")
    if required and not torch.cuda.is_available():
        print("COURSE_REQUIRE_CUDA=1 but CUDA is not available: no claim was checked.\n"
              "已设置 COURSE_REQUIRE_CUDA=1，但 CUDA 不可用：没有检查任何说法。")
        return 1
    contradictions = checked = 0
    for item in CLAIMS:
        print(f"lesson {item.lesson}\n  says: {item.says}")
        if not item.runnable():
            print(f"  skipped: needs {item.needs}, not on this machine / 跳过：需要 {item.needs}")
            continue
        try:
            holds, seen = item.check()
        except Exception as error:  # a claim that crashes is a contradiction too
            holds, seen = False, f"{type(error).__name__}: {error}"
        checked += 1
        contradictions += not holds
        print(f"  saw:  {seen}\n  {'ok' if holds else 'CONTRADICTION / 与课程说法矛盾'}")
    print(f"\n{checked - contradictions} passed, {contradictions} failed")
    return 1 if contradictions else 0


if __name__ == "__main__":
    sys.exit(main())
