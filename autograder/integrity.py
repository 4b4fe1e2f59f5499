"""Grading integrity: the real PyTorch and course functions, remembered before student code runs.

A grading kernel (course.kernels.manager.GradingKernelManager starts each one so) calls `start_grading()` at
start-up, before any cell of the submission. Every student call made through `checks.call` and every
hidden test then calls `verify()`, which fails, with a bilingual note, when any watched object is no
longer the one remembered: a patched `torch.Tensor.to`, `.device` or `.dtype`, `nn.Module.to`,
`torch.device`, a replaced check helper or method of the boundary's classes, an overridden builtin, a
watched function given other code or defaults in place, any name a fully watched module binds. Once
tampering is seen, it stays seen.

This stops the obvious ways of faking results from inside the notebook. It cannot stop an attacker
who has full Python access in the same process and sets out to defeat this module too (its record is a
dict of that process: attacks-slicing.toml, a-body-rewrites-integritys-own-record-and-the-leaf-flag); the
threat model in the README says so, and what such a body can buy: only what the judge cannot check in data.
"""
import functools
import importlib
import sys
import types

# Bound at this module's import, before any student code: a cell that replaced `importlib.import_module` showed this
# module a copy of the module it had patched (attacks-slicing.toml,
# importlib-import-module-patched-so-integrity-sees-the-originals)
_IMPORT = importlib.import_module
_MODULES = sys.modules

WATCHED = {
    # not what the boundary sends a report with: functions of C bound at its import, which look nothing up as they
    # run (boundary._send); a student may wrap torch.save or torch.load
    "torch": ["device", "equal", "is_tensor", "Tensor", "stack", "get_rng_state", "set_rng_state"],
    "torch.Tensor": ["to", "device", "dtype", "is_leaf", "requires_grad", "grad_fn", "cpu", "detach",
                     "numpy", "__class__", "shape", "is_floating_point", "grad", "data"],
    "torch.nn.Module": ["to", "parameters", "buffers", "named_parameters", "named_buffers", "modules",
                        "named_modules", "state_dict", "__setattr__", "__getattr__"],
    "torch.nn": ["Module", "Parameter"],
    "builtins": ["isinstance", "type", "getattr", "vars", "len", "all", "any", "print", "__import__", "id"],
    # every function of the checks' namespace and of each module they live in, private ones too (`_fail`)
    "autograder.checks": None,
    "autograder.checks.core": None,
    "autograder.checks.tensors": None,
    "autograder.checks.modules": None,
    "autograder.checks.training": None,
    "autograder.checks.data": None,
    "autograder.checks.checkpoints": None,
    # what the verdict's caller sends (a copy said to be the very argument: Known.index), and how it rebuilds what
    # the judge asks (a change of the judge's left out)
    "autograder.boundary": None,
    "autograder.calls": None,
    # what a test gives the student's code to watch it, named in a request and found in the caller by its name
    # (attacks-slicing.toml, unwatched-probe-global-rng-kept-replaced-in-a-cell)
    "autograder.probes": None,
    "autograder.messages": ["message", "text", "catalogue"],
    "autograder.devices": ["grading_devices", "same_device", "has_data"],
    "autograder.integrity": ["verify", "watched"],
}

_remembered: dict[str, object] = {}
_tampered: set[str] = set()


_OWNERS = {}  # module name → the module itself, as first found: a module put in its place later is tampering


def _module(name):
    module = _OWNERS.setdefault(name, _IMPORT(name))
    if _MODULES.get(name) is not module:
        return None  # another object under the module's name: every watched name of it differs
    return module


def watched() -> dict[str, object]:
    """The current objects behind every watched name (class attributes read raw, so properties count)."""
    current = {}
    for owner_name, names in WATCHED.items():
        if owner_name in ("torch.Tensor", "torch.nn.Module"):
            module_name, _, class_name = owner_name.rpartition(".")
            owner = getattr(_module(module_name), class_name, None)
            lookup = functools.partial(_raw_attribute, owner)
        else:
            owner = _module(owner_name)
            lookup = functools.partial(getattr, owner)
        if owner is None:  # every name remembered of it is gone
            current.update((key, None) for key in _remembered if key.startswith(owner_name + "."))
            continue
        if names is None:  # every name the module binds, functions, constants and imported modules alike
            names = [n for n in vars(owner) if not n.startswith("__") and f"{owner_name}.{n}" not in REBOUND]
            current.update(_methods(owner))
        for name in names:
            current[f"{owner_name}.{name}"] = lookup(name, None)
    for key, value in list(current.items()):
        current.update(_insides(key, value))
    return current


# what the course itself binds again while grading: the caller's boundary (checks.core.use_boundary)
REBOUND = {"autograder.checks.core.boundary"}


class _Held(tuple):
    """What a function holds that a cell can replace while the function stays the same object (`f.__code__ =`,
    `f.__defaults__ =`, a closure's cell): compared item by item, by identity."""

    def same(self, other) -> bool:
        return type(other) is _Held and len(other) == len(self) and all(a is b for a, b in zip(self, other))


def _insides(key, value) -> dict[str, _Held]:
    """The code, defaults and closure of a watched function, of a static or class method's, and of a property's
    getter and setter (attacks-slicing.toml, a-function-of-the-boundary-given-other-code-in-place)."""
    if type(value) is types.FunctionType:
        functions = {"": value}
    elif isinstance(value, (staticmethod, classmethod)):
        functions = {".__func__": value.__func__}
    elif isinstance(value, property):
        functions = {".fget": value.fget, ".fset": value.fset, ".fdel": value.fdel}
    else:
        return {}
    found = {}
    for part, function in functions.items():
        if type(function) is types.FunctionType:
            cells = [_cell_contents(cell) for cell in function.__closure__ or ()]
            kwdefaults = [item for pair in (function.__kwdefaults__ or {}).items() for item in pair]
            found[f"{key}{part}.__insides__"] = _Held((function.__code__, function.__defaults__, *cells, *kwdefaults))
    return found


def _cell_contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _methods(module) -> dict[str, object]:
    """What each class the module defines holds in its own namespace, read raw (a method, a property)."""
    return {f"{module.__name__}.{name}.{attribute}": value
            for name, klass in vars(module).items() if isinstance(klass, type) and klass.__module__ == module.__name__
            for attribute, value in vars(klass).items() if not isinstance(value, (str, type(None), int, tuple))}


def _raw_attribute(cls, name, default=None):
    for klass in getattr(cls, "__mro__", ()):
        if name in klass.__dict__:
            return klass.__dict__[name]
    return default


def remember():
    """Record the watched objects as they are now, and what a simulated machine may put in their place
    (idempotent: the first record wins)."""
    if not _remembered:
        _remembered.update(watched())
        simulate = _module("autograder.simulate")
        _EXCUSED.update(simulate._ON_AN_ACCELERATOR)


def start_grading():
    """Called at kernel start-up in a grading kernel, before any student code.

    Also checks after every cell, so that code which patches, fakes a result and restores the original
    before the tests run is still seen.
    """
    remember()
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.events.register("post_run_cell", lambda *args: tampered())


def tampered() -> list[str]:
    """Names whose object differs from the remembered one (sticky: once seen, always reported)."""
    remember()  # outside a grading kernel: the first check records what is there
    now = watched()
    _tampered.update(name for name, original in _remembered.items() if not _same(original, now.get(name))
                     and not _excused(_holder(name), now.get(_holder(name))))
    return sorted(_tampered)


def _holder(name) -> str:
    """The watched name whose function holds what `name` names (`torch.nn.Module.to.__insides__`: `….to`)."""
    for suffix in (".__insides__", ".__func__", ".fget", ".fset", ".fdel"):
        name = name.removesuffix(suffix)
    return name


def _same(original, found) -> bool:
    return found is original or type(original) is _Held and original.same(found)


def _excused(name, found) -> bool:
    simulated = _simulated(name)
    return simulated is not None and found is simulated


def _simulated(name) -> object:
    """What a simulated machine puts at `name` for its time (autograder/simulate.py: `Tensor.to` on a simulated
    accelerator), which is not tampering; None where nothing is simulated. Read from what simulate held when this
    module first looked (a cell that patched `simulate.replacement`, or its table, excused any patch:
    attacks-slicing.toml, simulate-replacement-patched-so-integrity-excuses-any-patch)."""
    simulate = _OWNERS.get("autograder.simulate") or _MODULES.get("autograder.simulate")
    if simulate is None:
        return None
    simulated = simulate._SIMULATED
    return _EXCUSED.get(name) if simulated and simulated[-1][0] else None


_EXCUSED = {}  # simulate's replacements as first read


def verify(what="grading"):
    """Raise a bilingual AssertionError when anything watched was replaced."""
    found = tampered()
    if found:
        from .messages import diagnostic

        raise diagnostic("tampering", what=what, names=", ".join(found[:8]))
