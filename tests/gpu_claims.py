"""Every claim the lessons make about CUDA, run for real: `python tests/gpu_claims.py`.

The lessons run on CPU runners, where a CUDA-only cell prints what it shows on a GPU instead (`on_a_gpu`);
this script is where those claims are checked, and where every such cell of the lessons runs for real
(the lesson top to bottom, on the GPU). The GPU CI job runs it with COURSE_REQUIRE_CUDA=1 (a job without
CUDA fails; =2 makes a job with one GPU fail too, instead of skipping the two-GPU claims); anyone can run
it by hand. Each claim prints what the lesson says next to what this machine did, and
the script exits 1 on any contradiction. Claims that need only the CUDA *build* (not a GPU) also run on
the CUDA-build runner, whose machine has no GPU.
"""
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Callable

import torch
from torch import nn

CLAIMS = []


@dataclass
class Claim:
    lesson: str
    says: str
    needs: str          # "cuda": a CUDA device; "2 cuda": two of them; "cuda-build": PyTorch built for CUDA
    check: Callable[[], tuple[bool, str]]  # → (holds, what was seen)
    shown: str | None = None  # the message key of the lesson cell it checks (what that cell prints without CUDA)
    wording: bool = False     # it compares PyTorch's own words, which another version than the pin may change

    def runnable(self) -> bool:
        if self.needs == "cuda-build":
            return torch.version.cuda is not None
        return torch.cuda.is_available() and torch.cuda.device_count() >= (2 if self.needs == "2 cuda" else 1)


def claim(lesson, says, needs="cuda", wording=False):
    def register(check):
        CLAIMS.append(Claim(lesson, says, needs, check, wording=wording))
        return check
    return register


def error_of(action, kind=RuntimeError) -> str:
    """The message of the `kind` error that `action` raises ("no error" when it raises none)."""
    try:
        action()
    except kind as error:
        return str(error)
    return "no error"


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


# ------------------------------------------------------------------ lessons 2 and 7 · non_blocking
@claim("2 · Every overload; 7 · Pinned memory",
       "a CUDA→CPU copy with non_blocking=True lands in pinned memory PyTorch allocates itself; a blocking one does not")
def device_to_host_lands_pinned():
    x = torch.arange(4.0, device="cuda")
    back = x.to("cpu", non_blocking=True)
    blocking = x.to("cpu")
    torch.cuda.synchronize()
    holds = back.is_pinned() and not blocking.is_pinned() and back.tolist() == [0.0, 1.0, 2.0, 3.0]
    return holds, f"non-blocking pinned: {back.is_pinned()}, blocking pinned: {blocking.is_pinned()}"


@claim("2 · Every overload",
       "a non_blocking CPU→CUDA copy from pageable memory is safe to use by later work on the same stream")
def pageable_host_to_device_is_stream_ordered():
    source = torch.arange(1e6)
    moved = source.to("cuda", non_blocking=True)
    holds = not source.is_pinned() and torch.equal((moved * 2).cpu(), source * 2)
    return holds, f"source pinned: {source.is_pinned()}, result correct: {holds}"


@claim("2 · When nothing changes; The shortcuts", ".to and .cuda() return the tensor itself when it is already there")
def to_returns_self_on_cuda():
    y = torch.ones(2, device="cuda")
    holds = y.cuda() is y and y.to("cuda") is y and y.to(y.device) is y
    return holds, f"y.cuda() is y: {y.cuda() is y}, y.to('cuda') is y: {y.to('cuda') is y}"


@claim("2 · …no longer a leaf", "moving a leaf to CUDA gives a non-leaf; .to the same device returns the leaf itself")
def leaf_rules_on_cuda():
    w = torch.randn(3, requires_grad=True)
    c = torch.randn(3, device="cuda", requires_grad=True)
    holds = not w.to("cuda").is_leaf and c.to("cuda") is c and c.is_leaf
    return holds, f"moved is leaf: {w.to('cuda').is_leaf}, same-device .to is self: {c.to('cuda') is c}"


# ------------------------------------------------------------------ lesson 3 · Module.to
@claim("3 · Parameter identity", "Module.to('cuda') keeps the parameter objects, so an optimizer built before still holds them")
def module_to_keeps_parameters():
    model = nn.Linear(2, 1)
    weight = model.weight
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.to("cuda")
    holds = (model.weight is weight and optimizer.param_groups[0]["params"][0] is model.weight
             and weight.device.type == "cuda")
    return holds, f"same object: {model.weight is weight}, now on {weight.device}"


@claim("3 · What moves", "a parameter's .grad moves to CUDA with it")
def grad_follows_to_cuda():
    model = nn.Linear(2, 2)
    model.weight.grad = torch.ones(2, 2)
    model.to("cuda")
    return model.weight.grad.device.type == "cuda", f"grad on {model.weight.grad.device}"


EARLY_READ = """
import torch

def early_read():
    x = torch.zeros(1 << 20, device="cuda")
    torch.cuda._sleep(1_000_000_000)          # keep the stream busy for a while
    x.add_(1)
    y = x.to("cpu", non_blocking=True)        # into pinned memory from PyTorch's caching host allocator
    arrived = torch.cuda.Event()
    arrived.record()
    early = arrived.query()                   # False: the copy is still queued behind the work
    torch.cuda.synchronize()
    return early, bool((y == 1).all())

print(*early_read(), *early_read())
"""


@claim("8 · The bug: reading a device→host non-blocking copy too early",
       "a non_blocking CUDA→CPU copy returns before the data has arrived; synchronising makes it correct. "
       "The first one of a process may already wait (its pinned allocation synchronises the device), so a "
       "missing synchronisation can pass a first test and fail later")
def early_read_race():
    """Both ways, in a fresh process (this one has pinned memory already): the first copy, whose pinned
    destination is a new allocation, and the second, which reuses it."""
    seen = subprocess.run([sys.executable, "-c", EARLY_READ], capture_output=True, text=True, timeout=300).stdout.split()
    if len(seen) != 4:
        return False, f"the probe printed {seen}"
    first_early, first_correct, later_early, later_correct = (word == "True" for word in seen)
    holds = first_correct and later_correct and not later_early
    return holds, (f"first copy of a process done at return: {first_early}; a later one: {later_early}; "
                   f"correct after synchronize: {first_correct and later_correct}")


@claim("7 · Pinned memory", "pin_memory() returns a new, pinned copy; the original stays pageable")
def pin_memory_copies():
    x = torch.ones(16)
    pinned = x.pin_memory()
    holds = pinned.is_pinned() and not x.is_pinned() and pinned.data_ptr() != x.data_ptr()
    return holds, f"copy pinned: {pinned.is_pinned()}, original pinned: {x.is_pinned()}"


# ------------------------------------------------------------------ lesson 6 · checkpoints
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


@claim("6 · Where the optimizer state goes when it is loaded",
       "with map_location='cpu', load_state_dict moves Adam's moment estimates to the parameter's device "
       "and leaves `step` on the CPU")
def adam_resume_from_cpu():
    step, moments = adam_checkpoint("cpu")
    return step.type == "cpu" and moments.type == "cuda", f"step: {step}, exp_avg: {moments}"


@claim("6 · Where the optimizer state goes when it is loaded",
       "with map_location='cuda', Adam's `step` stays on the GPU where torch.load put it")
def adam_resume_onto_cuda():
    step, moments = adam_checkpoint("cuda")
    return step.type == "cuda" and moments.type == "cuda", f"step: {step}, exp_avg: {moments}"


def synchronises(action) -> bool:
    """Whether `action` makes the CPU wait for the GPU (CUDA's sync debug mode turns that into an error)."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        action()
        return False
    except RuntimeError as error:
        if "synchroniz" not in str(error):
            raise
        return True
    finally:
        torch.cuda.set_sync_debug_mode("default")


@claim("6 · Where the optimizer state goes when it is loaded",
       "Adam with `step` on the GPU (map_location='cuda') synchronises at every step; with `step` on the CPU it does not")
def adam_step_on_cuda_synchronises():
    import io

    model = nn.Linear(10, 1).cuda()
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 10, device="cuda")).sum().backward()
    optimizer.step()
    saved = io.BytesIO()
    torch.save(optimizer.state_dict(), saved)
    seen = {}
    for where in ("cuda", "cpu"):
        saved.seek(0)
        resumed = torch.optim.Adam(model.parameters())
        resumed.load_state_dict(torch.load(saved, map_location=where))
        model.zero_grad()
        model(torch.randn(4, 10, device="cuda")).sum().backward()
        seen[where] = synchronises(resumed.step)
    return seen == {"cuda": True, "cpu": False}, f"step synchronises with step on: {seen}"


@claim("8 · Hidden transfers synchronise too", ".numpy() on a CUDA tensor raises TypeError; it does not synchronise")
def numpy_raises_on_cuda():
    on_cuda = torch.ones(2, device="cuda")
    text = error_of(on_cuda.numpy, TypeError)
    waited = synchronises(lambda: error_of(on_cuda.numpy, TypeError))
    return "cuda" in text and not waited, f"{text} (synchronised: {waited})"


@claim("8 · Hidden transfers synchronise too",
       "synchronise: .item(), .tolist(), print, Python if, boolean masks, nonzero, .cpu(), a blocking upload; "
       "do not: t * 2, t.max(), a non_blocking upload")
def hidden_synchronisations():
    t = torch.tensor([1.0, -2.0, 3.0], device="cuda")
    x = torch.randn(1024)
    expected = {
        ".item()": (lambda: t[0].item(), True),
        ".tolist()": (lambda: t.tolist(), True),
        "print": (lambda: str(t), True),
        "if": (lambda: bool(t.sum() > 0), True),
        "boolean mask": (lambda: t[t > 0], True),
        "nonzero": (lambda: torch.nonzero(t), True),
        ".cpu()": (lambda: t.cpu(), True),
        "blocking upload": (lambda: x.to("cuda"), True),
        "t * 2": (lambda: t * 2, False),
        "t.max()": (lambda: t.max(), False),
        "non_blocking upload": (lambda: x.to("cuda", non_blocking=True), False),
    }
    seen = {name: synchronises(action) for name, (action, _) in expected.items()}
    wrong = [name for name, (_, syncs) in expected.items() if seen[name] != syncs]
    return not wrong, "synchronise: " + ", ".join(n for n, s in seen.items() if s) + (f"; wrong: {wrong}" if wrong else "")


# ------------------------------------------------------------------ lessons 9 and 10 · autocast on CUDA
AUTOCAST_TABLE = {  # result → dtype under torch.autocast("cuda", dtype=torch.float16)
    "linear": torch.float16,
    "matmul": torch.float16,
    "relu of a float16 input": torch.float16,
    "softmax": torch.float32,
    "layer_norm": torch.float32,
    "sum": torch.float32,
    "mse_loss": torch.float32,
    "cross_entropy": torch.float32,
    "float32 + float16": torch.float32,
}


@claim("9 · What is used today", "which dtype each op produces under float16 autocast on CUDA: " +
       ", ".join(f"{op} → {str(dtype).removeprefix('torch.')}" for op, dtype in AUTOCAST_TABLE.items()))
def autocast_dtype_table():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).cuda()
    x = torch.randn(5, 4, device="cuda")
    targets = torch.tensor([0, 1, 2, 0, 1], device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        hidden = net[0](x)
        logits = net(x)
        loss = nn.functional.cross_entropy(logits, targets)
        seen = {
            "linear": hidden.dtype,
            "matmul": (x @ net[0].weight.T).dtype,
            "relu of a float16 input": hidden.relu().dtype,
            "softmax": torch.softmax(logits, dim=-1).dtype,
            "layer_norm": nn.functional.layer_norm(logits, (3,)).dtype,
            "sum": logits.sum().dtype,
            "mse_loss": nn.functional.mse_loss(logits, torch.zeros_like(logits)).dtype,
            "cross_entropy": loss.dtype,
            "float32 + float16": (x[:, :3] + logits.half()).dtype,
        }
    loss.backward()
    master = net[0].weight.dtype == net[0].weight.grad.dtype == torch.float32
    wrong = {op: dtype for op, dtype in seen.items() if dtype != AUTOCAST_TABLE[op]}
    shown = ", ".join(f"{op} → {str(d).removeprefix('torch.')}" for op, d in seen.items())
    return not wrong and master, f"{shown}; weights and grads float32: {master}"


@claim("9 · Which 16-bit type, on which device",
       "bfloat16 is native from compute capability 8 (Ampere) on: is_bf16_supported(including_emulation=False)")
def bf16_native_from_ampere():
    native = torch.cuda.is_bf16_supported(including_emulation=False)
    capability = torch.cuda.get_device_capability()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        produced = nn.Linear(4, 2).cuda()(torch.randn(3, 4, device="cuda")).dtype
    holds = native == (capability[0] >= 8) and produced == torch.bfloat16
    return holds, f"capability {capability}, native bf16: {native}, autocast produced {produced}"


def bce_under_cuda_autocast():
    """binary_cross_entropy's error under float16 CUDA autocast ("no error" if none), and the logits version's dtype."""
    scores, labels = torch.randn(8, 1, device="cuda"), torch.randint(0, 2, (8, 1), device="cuda").float()
    with torch.autocast("cuda", dtype=torch.float16):
        refused = error_of(lambda: nn.functional.binary_cross_entropy(torch.sigmoid(scores), labels))
        with_logits = nn.functional.binary_cross_entropy_with_logits(scores, labels).dtype
    return refused, with_logits


@claim("10 · `binary_cross_entropy` is refused under CUDA autocast",
       "binary_cross_entropy raises RuntimeError under float16 CUDA autocast; the logits version gives float32")
def bce_refused_under_cuda_autocast():
    refused, with_logits = bce_under_cuda_autocast()
    holds = refused != "no error" and with_logits == torch.float32
    return holds, f"binary_cross_entropy: {refused.splitlines()[0]}; with logits: {with_logits}"


@claim("10 · `binary_cross_entropy` is refused under CUDA autocast",
       "its error says binary_cross_entropy is 'unsafe to autocast'", wording=True)
def bce_refusal_wording():
    refused, _ = bce_under_cuda_autocast()
    return "unsafe to autocast" in refused, refused.splitlines()[0]


def norms_under_16_bit_inputs_on_cuda():
    """The errors of a float32 LayerNorm and GroupNorm fed float16 on CUDA, the dtype a float32 BatchNorm1d
    returns, and what lesson 10's hooked model returns."""
    x = torch.randn(4, 8, device="cuda", dtype=torch.float16)
    refused = [error_of(lambda: norm.cuda()(x)) for norm in (nn.LayerNorm(8), nn.GroupNorm(2, 8))]
    batch_norm = nn.BatchNorm1d(8).cuda().eval()(x).dtype
    net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 8), nn.LayerNorm(8)).cuda().eval()
    for module in net.modules():  # lesson 10's recipe
        if isinstance(module, (nn.BatchNorm1d, nn.LayerNorm)):
            module.register_forward_pre_hook(lambda m, args: tuple(a.float() for a in args))
            module.register_forward_hook(lambda m, args, output: output.to(torch.float16))
        else:
            for p in module.parameters(recurse=False):
                p.data = p.data.to(torch.float16)
    return refused, batch_norm, net(torch.randn(3, 4, device="cuda", dtype=torch.float16)).dtype


@claim("10 · Casting a model for 16-bit inference",
       "a float32 LayerNorm refuses a float16 input on CUDA, and so does GroupNorm; a float32 BatchNorm1d accepts "
       "it; with float32 fed in and float16 handed back by hooks, the lesson's cast model runs")
def float32_norms_refuse_16_bit_inputs_on_cuda():
    refused, batch_norm, output = norms_under_16_bit_inputs_on_cuda()
    holds = "no error" not in refused and batch_norm == torch.float16 and output == torch.float16
    return holds, f"LayerNorm, GroupNorm: {[r.splitlines()[0] for r in refused]}; " \
                  f"BatchNorm1d: {batch_norm}; the recipe's model: {output}"


@claim("10 · Casting a model for 16-bit inference",
       "LayerNorm's refusal reads \"expected scalar type Half but found Float\"", wording=True)
def layer_norm_refusal_wording():
    [layer_norm, _], _, _ = norms_under_16_bit_inputs_on_cuda()
    return "expected scalar type Half but found Float" in layer_norm, layer_norm.splitlines()[0]


@claim("10 · Casting a model for 16-bit inference",
       "for a bfloat16 input the refusal names BFloat16: \"expected scalar type BFloat16 but found Float\"", wording=True)
def layer_norm_refusal_wording_bfloat16():
    refused = error_of(lambda: nn.LayerNorm(8).cuda()(torch.randn(4, 8, device="cuda", dtype=torch.bfloat16)))
    return "expected scalar type BFloat16 but found Float" in refused, refused.splitlines()[0]


# ------------------------------------------------------------------ lesson 1 · which GPUs a process sees
@claim("1 · The current device", 'an unindexed "cuda" and .cuda() land on the current device, GPU 0 by default')
def unindexed_cuda_is_the_current_device():
    seen = (torch.cuda.current_device(), torch.zeros(1, device="cuda").device, torch.zeros(1).cuda().device)
    return seen == (0, torch.device("cuda:0"), torch.device("cuda:0")), str(seen)


@claim("1 · The current device", 'inside torch.cuda.device(1), "cuda" resolves to cuda:1', needs="2 cuda")
def current_device_block():
    with torch.cuda.device(1):
        seen = torch.zeros(1, device="cuda").device
    return seen == torch.device("cuda:1") and torch.cuda.current_device() == 0, str(seen)


def _visible_probe(probe, visible):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible}
    return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                          timeout=120).stdout.split()


@claim("1 · `CUDA_VISIBLE_DEVICES`", "showing only the second GPU renumbers it: the child sees one GPU, "
       "and its cuda:0 is our cuda:1 (same UUID)", needs="2 cuda")
def visible_devices_renumber():
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    seen = _visible_probe("import torch; print(torch.cuda.device_count(), torch.cuda.get_device_properties(0).uuid)",
                          visible.split(",")[1] if visible else "1")
    return seen == ["1", str(torch.cuda.get_device_properties(1).uuid)], " ".join(seen)


@claim("1 · `CUDA_VISIBLE_DEVICES`", "setting it after CUDA has initialised does not hide the GPU from the process")
def visible_devices_too_late():
    probe = ("import os, torch; torch.zeros(1, device='cuda'); os.environ['CUDA_VISIBLE_DEVICES'] = ''; "
             "print(torch.ones(1, device='cuda').device)")
    seen = _visible_probe(probe, os.environ.get("CUDA_VISIBLE_DEVICES", "0") or "0")
    return seen == ["cuda:0"], " ".join(seen)


# ------------------------------------------------------------------ lesson 13 · errors
@claim("13 · Reading a device-mismatch error",
       "a linear layer on CUDA fed a CPU batch: 'Expected all tensors to be on the same device, but got "
       "mat1 is on cpu, different from other tensors on cuda:0 (when checking argument in method "
       "wrapper_CUDA_addmm)'", wording=True)
def linear_mismatch_message():
    text = error_of(lambda: nn.Linear(3, 2).cuda()(torch.randn(4, 3)))
    expected = ("Expected all tensors to be on the same device, but got mat1 is on cpu, different from "
                "other tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)")
    return text == expected, text


@claim("13 · Reading a device-mismatch error",
       "an element-wise op: 'Expected all tensors to be on the same device, but found at least two devices'", wording=True)
def elementwise_mismatch_message():
    text = error_of(lambda: torch.ones(2, device="cuda") + torch.ones(2))
    return "but found at least two devices" in text, text


@claim("1 · meta; 13 · A device mismatch is an error", "a 0-dim CPU tensor mixes with a CUDA tensor without error")
def zero_dim_cpu_scalar_mixes():
    result = torch.ones(2, device="cuda") + torch.tensor(1.0)
    return result.device.type == "cuda", f"result on {result.device}"


@claim("13 · Reading a device-mismatch error",
       "unlike a meta/cpu product, a cpu @ cuda matrix product raises")
def cuda_matmul_checks_devices():
    text = error_of(lambda: torch.ones(2, 2) @ torch.ones(2, 2, device="cuda"))
    return "Expected all tensors to be on the same device" in text, text


MiB = 2**20


@claim("13 · GPU memory", "model.to('cpu') frees the parameters but Adam's CUDA state stays until it is moved too")
def optimizer_state_keeps_gpu_memory():
    import gc

    model = nn.Linear(1024, 1024).to("cuda")
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(8, 1024, device="cuda")).sum().backward()
    optimizer.step()
    model.zero_grad(set_to_none=True)
    before = torch.cuda.memory_allocated()
    model.to("cpu")
    freed = round((before - torch.cuda.memory_allocated()) / MiB)
    state_on_gpu = optimizer.state[model.weight]["exp_avg"].is_cuda
    before = torch.cuda.memory_allocated()
    optimizer.load_state_dict(optimizer.state_dict())  # moves the moment estimates to the parameters' device
    gc.collect()
    freed_by_state = round((before - torch.cuda.memory_allocated()) / MiB)
    holds = freed >= 4 and state_on_gpu and freed_by_state >= 8
    return holds, f"model.to('cpu') freed {freed} MiB, state on CUDA: {state_on_gpu}, moving state freed {freed_by_state} MiB"


@claim("3 · Building a large model on `meta`; 13 · GPU memory", "to_empty allocates the whole model on the target device")
def to_empty_allocates_everything():
    with torch.device("meta"):
        big = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(8)])
    size = sum(p.numel() * p.element_size() for p in big.parameters())
    before = torch.cuda.memory_allocated()
    big.to_empty(device="cuda")
    grew = torch.cuda.memory_allocated() - before
    return grew >= size, f"model {size // MiB} MiB, allocated {grew // MiB} MiB"


# ------------------------------------------------------------------ the lessons' own CUDA-only cells
# Each CUDA-only cell prints, where it cannot run, `on_a_gpu(KEY)`: the sentence of the message catalogue
# that says what it shows on a GPU. Here each lesson runs top to bottom on the GPU (its own cells, not a copy
# of them), and every such cell must run without error and print what its sentence says: the lines below,
# and for the timing and error-line cells a comparison of the numbers it printed.
LESSONS = Path(__file__).resolve().parent.parent / "notebooks"
ON_A_GPU = re.compile(r'on_a_gpu\("(?P<key>\w+)"(?:, gpus=(?P<gpus>\d))?\)')


def _milliseconds(shown, name):
    return float(re.search(rf": {re.escape(name)}: ([0-9.]+) ms", shown)[1])


SYNCHRONISING = ["t[0].item()", "t.tolist()", "if t.sum() > 0:", "t[t > 0]", "torch.nonzero(t)", "t.cpu()", "print(t)",
                 "pageable.to(device)"]
NOT_SYNCHRONISING = ["t * 2", "t.max()", "pageable.to(device, non_blocking=True)"]


def _synchronising(shown):
    """Call → "True" / "False", as lesson 8's cell printed whether it synchronises."""
    return dict(re.findall(r"^(.+?) +synchronises: (True|False)$", shown, re.M))


def _launch_lines(shown):
    return [int(n) for n in re.findall(r"raised at line (\d+)", shown)]


SHOWN = {  # message key → lines its cell prints on a GPU, and a check of its numbers
    "gpu_shows_pinned_copy_back": [r"destination in pinned memory: True", r"read after synchronising: \[0\.0, 1\.0, 2\.0, 3\.0\]"],
    "gpu_shows_transfer_timings": [lambda shown: _milliseconds(shown, "pinned") < _milliseconds(shown, "pageable"),
                                   lambda shown: _milliseconds(shown, "non_blocking") < 0.8 * _milliseconds(shown, "blocking")],
    "gpu_shows_early_read": [r"read before synchronising, correct\? (True|False)", r"destination pinned by PyTorch: +True",
                             r'Module\.to\("cpu", non_blocking=True\) pinned every parameter: True'],
    "gpu_shows_hidden_syncs": [lambda shown: _synchronising(shown) == {**dict.fromkeys(SYNCHRONISING, "True"),
                                                                       **dict.fromkeys(NOT_SYNCHRONISING, "False")},
                               r"t\.numpy\(\): TypeError"],
    "gpu_shows_profiler_copies": [r"a Memcpy HtoD row: True", r"a Memcpy DtoH row: True", r"a cudaStreamSynchronize row: True"],
    "gpu_shows_autocast_table": [r"CUDA float16 table measured here: as listed"],
    "gpu_shows_bce_refused": [r"RuntimeError: torch\.nn\.functional\.binary_cross_entropy and torch\.nn\.BCELoss are unsafe to autocast\.",
                              r"with logits: torch\.float32"],
    "gpu_shows_norm_refusal": [r"CUDA refuses the mix: expected scalar type Half but found Float",
                               r"the hooked model on CUDA: torch\.bfloat16"],
    "gpu_shows_visible_renumber": [r"the child sees one GPU: True", r"its cuda:0 is our cuda:1: True"],
    "gpu_shows_random_streams": [r"same seed, same numbers on the CPU and on CUDA: False",
                                 r"a CPU generator for a CUDA tensor: RuntimeError: Expected a 'cuda' device type for generator but found 'cpu'"],
    "gpu_shows_cuda_in_forked_worker": [r"a forked worker that creates a CUDA tensor: RuntimeError: Cannot re-initialize CUDA in forked "
                                        r"subprocess\. To use CUDA with multiprocessing, you must use the 'spawn' start method"],
    "gpu_shows_side_stream_prefetch": [r"prefetched on a side stream, the same outputs as batch by batch: True"],
    "gpu_shows_current_device": [r"current device: 0", r'"cuda" resolves to cuda:0 and \.cuda\(\) to cuda:0'],
    "gpu_shows_ddp_two_gpus": [r"every rank loaded it onto its own device: True", r"running_mean of the whole batch: True",
                               r"parameters identical on all ranks: +True"],
    "gpu_shows_ddp_split_model": [r"device_ids=\[0\] for a model on two GPUs: ValueError: DistributedDataParallel device_ids and output_device "
                                  r"arguments only work with single-device/multiple-device GPU modules or CPU modules",
                                  r"output on: cuda:1", r"each gradient on its parameter's device: True"],
    "gpu_shows_module_between_gpus": [r"returns the same module: True", r"weight on cuda:1: True"],
    "gpu_shows_16_bit_matmul_speed": [r"float16 faster than float32: True",
                                      lambda shown: _milliseconds(shown, "float16") < _milliseconds(shown, "float32")],
    "gpu_shows_mismatch_messages": [r"nn\.Linear: RuntimeError: Expected all tensors to be on the same device, but got mat1 is on "
                                    r"cpu, different from other tensors on cuda:0 \(when checking argument in method wrapper_CUDA_addmm\)",
                                    r"element-wise: RuntimeError: Expected all tensors to be on the same device, but found at least two devices"],
    "gpu_shows_memory_counters": [r"allocated: 256 MiB", r"after del: allocated 0 MiB, peak 256 MiB, still reserved by the cache: True",
                                  r"after empty_cache, reserved < 256 MiB: True"],
    "gpu_shows_optimizer_state_memory": [r"model\.to\('cpu'\) freed 8 MiB", r"optimizer state still on CUDA: True",
                                         r"moving the optimizer state freed 8 MiB; state on CUDA: False"],
    "gpu_shows_out_of_memory": [r"torch\.OutOfMemoryError: CUDA out of memory"],
    "gpu_shows_launch_blocking": [lambda shown: len(_launch_lines(shown)) == 2 and _launch_lines(shown)[1] == 4 < _launch_lines(shown)[0]],
    "gpu_shows_sync_warning": [r"warnings: \['called a synchronizing CUDA operation"],
    "gpu_shows_to_empty_memory": [r"to_empty allocated the whole model: True \(32 MiB\)"],
    "gpu_shows_memory_snapshot": [r"64 MiB allocations recorded: 2 \| each with its Python stack: True",
                                  r"memory_summary\(\) has the row 'Allocated memory': True"],
}


def gpu_only_cells() -> dict[str, tuple[Path, int, int]]:
    """Message key → (lesson, cell index, GPUs it needs), for every lesson cell that calls on_a_gpu."""
    import nbformat

    found = {}
    for path in sorted(LESSONS.glob("*.ipynb")):
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
            for match in ON_A_GPU.finditer(cell.source if cell.cell_type == "code" else ""):
                found[match["key"]] = (path, index, int(match["gpus"] or 1))
    return found


@cache
def lesson_run(path: Path):
    """The lesson run top to bottom in a kernel of its own on this machine (errors kept in the outputs)."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=900, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return notebook


def lesson_cell_shows(key, path, index):
    def check():
        cell = lesson_run(path).cells[index]
        errors = [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]
        shown = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        missing = [f"{e}" if isinstance(e, str) else "a comparison of its numbers" for e in SHOWN[key]
                   if not (re.search(e, shown) if isinstance(e, str) else _holds(e, shown))]
        return not errors and not missing, "; ".join(errors) or (f"missing: {missing}; " if missing else "") + shown[-400:]
    return check


def _holds(predicate, shown) -> bool:
    try:
        return bool(predicate(shown))
    except (TypeError, ValueError, IndexError):  # a number it should have printed is not there
        return False


for _key, (_path, _index, _gpus) in gpu_only_cells().items():
    CLAIMS.append(Claim(f"{_path.stem[:2].lstrip('0')} · cell {_index}", f"the lesson's own cell shows what {_key} says",
                        "2 cuda" if _gpus >= 2 else "cuda", lesson_cell_shows(_key, _path, _index), shown=_key))


def other_version_than_the_pin() -> str | None:
    """The pinned version (Makefile) when this torch is another one, else None."""
    from gpu_check import course_torch

    pin = course_torch().pin
    return pin if torch.__version__.split("+")[0] != pin else None


def main() -> int:
    """Exit 1 on a contradiction, or when COURSE_REQUIRE_CUDA asks for more GPUs than there are (1: one,
    2: two, so that the two-GPU claims cannot pass by being skipped). On a torch other than the pin, a claim
    that compares PyTorch's own words (`wording`) and fails is a version difference, not a contradiction."""
    required = int(os.environ.get("COURSE_REQUIRE_CUDA") or 0)
    present = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if present < required:
        print(f"COURSE_REQUIRE_CUDA={required} but this machine has {present} CUDA GPU(s): no claim was checked.\n"
              f"已设置 COURSE_REQUIRE_CUDA={required}，但这台机器只有 {present} 块 CUDA GPU：没有检查任何说法。")
        return 1
    pin = other_version_than_the_pin()
    contradictions = checked = skipped = differ = 0
    for item in CLAIMS:
        print(f"lesson {item.lesson}\n  says: {item.says}")
        if not item.runnable():
            print(f"  skipped: needs {item.needs}, not on this machine / 跳过：需要 {item.needs}")
            skipped += 1
            continue
        worded = item.wording
        try:
            holds, seen = item.check()
        except Exception as error:  # a claim that crashes is a contradiction too, whatever it compares
            holds, seen, worded = False, f"{type(error).__name__}: {error}", False
        checked += 1
        print(f"  saw:  {seen}")
        if holds:
            print("  ok")
        elif worded and pin:
            differ += 1
            print(f"  differs only with the torch version: torch {torch.__version__} words it otherwise than {pin} / "
                  f"只因 torch 版本不同而不同：torch {torch.__version__} 的措辞与 {pin} 不同")
        else:
            contradictions += 1
            print("  CONTRADICTION / 与课程说法矛盾")
    print(f"\n{checked - contradictions - differ} passed, {contradictions} failed, {skipped} not checked on this machine"
          + (f", {differ} differ only with the torch version" if differ else ""))
    return 1 if contradictions else 0


if __name__ == "__main__":
    sys.exit(main())
