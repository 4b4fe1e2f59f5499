"""What every check stands on: `call` (a student's function, its errors turned into diagnostics), `_fail`,
the errors PyTorch raises for the classic mistakes (`KNOWN_ERRORS`), and a tensor's device and dtype read
through PyTorch's C type.
"""
import contextlib
import re
import sys
import warnings

import torch
from torch import nn

from .. import integrity
from ..messages import diagnostic

# Read a tensor's device and dtype through PyTorch's C type, which Python code cannot patch, and accept
# only real tensors: a patched `torch.Tensor.device` or an imitation object cannot fake a result.
_TENSOR_TYPES = (torch.Tensor, nn.Parameter)
_device_of = torch._C.TensorBase.device.__get__
_dtype_of = torch._C.TensorBase.dtype.__get__

# Errors PyTorch raises for the classic mistakes, and the message that explains each.
KNOWN_ERRORS = [
    (re.compile(r"Expected all tensors to be on the same device|is not on the expected device"), "device_mismatch"),
    (re.compile(r"must have the same dtype"), "dtype_mismatch"),  # mat1 and mat2 of a matrix product
    (re.compile(r"Attempting to deserialize object on a CUDA device"), "cuda_checkpoint"),
    (re.compile(r"Can't call numpy\(\) on Tensor that requires grad"), "numpy_requires_grad"),
    # a GPU's (or meta's): PyTorch's device type names, ASCII and short, since the grader shows the words it matched
    # (diagnostics._known_error), and `\w+` carried 600 bytes of any text as CJK ideographs (attacks-slicing.toml,
    # known-numpy-error-pattern-carries-any-word-out-of-the-caller)
    (re.compile(r"can't convert [a-z]{2,8}(:\d{1,2})? device type tensor to numpy"), "numpy_on_device"),
    (re.compile(r"unsupported ScalarType BFloat16"), "numpy_bfloat16"),
    (re.compile(r"_scale is None"), "amp_scale_not_used"),  # GradScaler.unscale_/step before any scale()
    (re.compile(r"No inf checks were recorded prior to update"), "amp_update_without_step"),  # optimizer.step(), then update()
    (re.compile(r"Default process group has not been initialized"), "no_process_group"),  # a4
    # what a GPU refuses, and so does the simulated one (autograder/simulate.py): device type names, as above
    (re.compile(r"Expected a '[a-z]{2,8}' device type for generator but found '[a-z]{2,8}'"), "generator_device"),
    (re.compile(r"Cannot convert a MPS Tensor to float64 dtype"), "mps_float64"),
]


def _name(obj) -> str:
    return type(obj).__qualname__


def _fail(key, **fields):
    __tracebackhide__ = True
    raise diagnostic(key, **fields)


# The verdict's side of the boundary (autograder/boundary.py), where a sealed test cell runs (`use_boundary`):
# there a student's function runs in another process than the checks, and `call` returns what that process
# sent back, rebuilt from data. None: `call` runs the function here (`run_here`).
boundary = None


def use_boundary(side):
    """`call` goes through `side` (a boundary.Recorder in the verdict's caller, a boundary.Judge in its judge)."""
    global boundary
    boundary = side


# where a tensor rebuilt there keeps the caller's name of its grad_fn, for a diagnostic (_grad_fn_name)
GRAD_FN_NAME = "course_grad_fn_name"


def call(what, function, *args, then=None, **kwargs):
    """Run a student's function; an exception it raises becomes a bilingual failure, chained to it.

    `then(result, *args, **kwargs)`, if given, runs right after it and its value is returned instead: a
    measurement of the student's result where the result was made (a sealed test's judge sees only data).
    Warnings it emits are recorded, not printed, and what it writes to `sys.stderr` (a `print(...,
    file=sys.stderr)`, a `logging` warning with no handler of the student's, a progress bar) is shown on
    stdout: nbgrader gives zero to a test cell that writes to stderr, and a correct answer must not lose
    points to a PyTorch warning or to its own progress messages. Failures still raise.
    """
    __tracebackhide__ = True
    if boundary is not None:
        return boundary.call(what, function, args, kwargs, then, run_here)
    return run_here(what, function, args, kwargs, then)


def run_here(what, function, args, kwargs, then, verify=True):
    """`call` in this process: what a boundary's side runs where the student's function is. `verify`: whether
    this process may have run student code, whose tampering is looked for before and after (not in the judge,
    which never does: a third of the integrity checks of a4's verdict, 0.6 s)."""
    __tracebackhide__ = True
    if verify:
        integrity.verify(what)
    try:
        with warnings.catch_warnings(record=True), _errors_shown_as_output(), _on_meta(args, kwargs):
            warnings.simplefilter("always")
            result = function(*args, **kwargs)
            if then is not None:
                result = then(result, *args, **kwargs)
    except NotImplementedError as error:
        if not str(error):  # the release's stub, `raise NotImplementedError()`, not PyTorch's own
            raise diagnostic("not_answered", what=what) from error
        raise diagnostic("raised", what=what, error=f"NotImplementedError: {str(error).splitlines()[0]}") from error
    except Exception as error:
        raise raised(what, _name(error), str(error)) from error
    if verify:
        integrity.verify(what)
    return result


_VALUES_ON_META = [True]  # whether a call given meta tensors reads values there (host_reads_fail_on_meta)


@contextlib.contextmanager
def host_reads_fail_on_meta():
    """Within it, a call given meta tensors reads no values there, as PyTorch's own meta device: a check that asks
    whether an answer reads a value on the host (lesson 08's epoch_loss) sees such a read fail."""
    _VALUES_ON_META.append(False)
    try:
        yield
    finally:
        _VALUES_ON_META.pop()


@contextlib.contextmanager
def _errors_shown_as_output():
    """What the student's code writes on standard error while it is called shows as plain output: nbgrader, and
    `nbgrader validate`, give no points to a test cell with any (a right answer that printed its progress to
    sys.stderr, or logged a warning, lost its points in the kernel). Through `sys.stderr`, and through the stream a
    cell took before the call: a handler `logging.basicConfig()` made (a right train_step that logged its device
    lost its test under nbgrader autograde, not in the verdict alone). In a kernel that stream is ipykernel's, which
    names its output when it sends it: it is named stdout for the call's time, what it holds sent first."""
    stream = sys.stderr
    kernels = getattr(stream, "name", None) == "stderr" and type(stream).__module__.startswith("ipykernel.")
    if kernels:
        stream.flush()  # ipykernel's waits until what it held is sent
        stream.name = "stdout"
    try:
        with contextlib.redirect_stderr(sys.stdout):
            yield
    finally:
        if kernels:
            stream.flush()
            stream.name = "stderr"


@contextlib.contextmanager
def _on_meta(args, kwargs):
    """For a call given tensors on the meta device, standing in for a GPU, which hold no values: a read of one
    number gives what the call computed (probes.MetaValues: `print(loss.item())` in a train_step); anomaly detection
    that a student left on (`torch.autograd.set_detect_anomaly(True)`) keeps its traces and checks no gradient for
    NaN by reading its values (a trial of ordinary styles: a2's train_step lost 3 points to it)."""
    if not any(_device_of(t).type == "meta" for t in _tensors_in((args, kwargs))):
        yield
        return
    from ..probes import MetaValues

    with contextlib.ExitStack() as stack:
        if torch.is_anomaly_enabled():
            stack.enter_context(torch.autograd.set_detect_anomaly(True, check_nan=False))
        if _VALUES_ON_META[-1]:
            stack.enter_context(MetaValues())
        yield


def _tensors_in(value, depth=0):
    """The tensors of `value`: itself, in its lists, tuples and dicts, and a module's parameters and buffers."""
    if isinstance(value, _TENSOR_TYPES):
        yield value
    elif isinstance(value, nn.Module):
        yield from value.parameters()
        yield from value.buffers()
    elif isinstance(value, (list, tuple, dict)) and depth < 8:
        for item in value.values() if isinstance(value, dict) else value:
            yield from _tensors_in(item, depth + 1)


def raised(what, kind, text, generic="raised") -> AssertionError:
    """The diagnostic of an error the student's code raised (its type's name `kind`, its `text`): the
    classic mistake PyTorch's words show (KNOWN_ERRORS), else `generic`, with the error's first line."""
    key = next((key for pattern, key in KNOWN_ERRORS if pattern.search(text)), generic)
    return diagnostic(key, what=what, error=f"{kind}: {text.splitlines()[0] if text else ''}")


def _grad_fn_name(t) -> str:
    """The name of `t`'s grad_fn, as the process that made `t` saw it (a sealed test rebuilds it)."""
    return t.__dict__.get(GRAD_FN_NAME) or _name(t.grad_fn)
