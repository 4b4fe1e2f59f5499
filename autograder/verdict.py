"""The verdict: whether each test cell passed, decided in a process the submission's kernel never touched.

A check that runs in the student's kernel can be undone by the student's kernel: a patched helper, an
IPython input transformer, a display hook that publishes a partial-credit result, a custom exception
handler that swallows the failure. So the points do not come from the kernel that ran the notebook.
`course.plugins.autograde.DecideGrades` (an nbgrader preprocessor, so plain `nbgrader autograde` and
`course grade` both use it) starts this module as a plain Python process (no IPython, no Jupyter
sockets) in a sandbox of its own, in a fresh empty folder, and sends it the notebook's cells:

* the instructor's locked cells (restored from the gradebook by nbgrader) run as they are;
* of the student's cells only the *definitions* run: `import`, `def`, `class` and assignments of
  constant expressions. No other statement of the submission ever runs here, and a definition whose
  evaluation would run student code (a student-made decorator, a metaclass, a default argument that
  calls a student function, an assignment to an attribute such as `torch.Tensor.to = ...`) is left out.
  So nothing the student wrote runs before a test calls it;
* every test cell (the instructor's, hidden tests included) runs in its own forked child, which sees
  the definitions as they stand at that cell and nothing any other test did. Its standard streams go
  to /dev/null and it keeps no descriptor but the pipe of its own result; the parent, which has run no
  student code, enforces the time limit and writes one JSON line per test cell on the grader's pipe.

In a sealed test cell (its `sealed`, from DecideGrades.sealed) even that child runs no student
code: the cell runs as a caller, which runs the student's functions, and a judge, which runs the checks
on the data the caller sent back and alone writes the result (autograder/boundary.py). In a cell that is
not sealed, a student's function body still runs, when a test calls it, in that test's child, next to the
checks of that one test cell (README, "Threat model").
"""
import __future__
import ast
import builtins
import ctypes
import json
import os
import re
import select
import signal
import sys
import time

RESULT_LIMIT = 16_000  # bytes of one test's result (its diagnostic)
ANNOTATIONS = __future__.annotations.compiler_flag  # a student's annotations are never evaluated
# builtins a constant expression may call: they run no student code
SAFE_BUILTINS = {"abs", "bool", "bytes", "complex", "dict", "divmod", "float", "frozenset", "int", "len",
                 "list", "max", "min", "pow", "range", "repr", "round", "set", "slice", "sorted", "str",
                 "sum", "tuple", "zip", "reversed", "enumerate"}
SAFE_DECORATORS = {"property", "staticmethod", "classmethod"}
# installed callables a constant expression or a decorator may call (by their full name, whatever the
# import's alias): constructors and questions that change no state. Anything else found through an import
# may not run at definition time: `torch.__dict__.update(...)`, `torch.set_default_dtype(...)`,
# `torch.library.impl(...)` or `atexit.register` would change what every test computes.
INSTALLED_CALLS = {
    "torch.device", "torch.tensor", "torch.zeros", "torch.ones", "torch.full", "torch.empty", "torch.arange",
    "torch.linspace", "torch.eye", "torch.cuda.is_available", "torch.cuda.device_count",
    "torch.backends.mps.is_available", "torch.accelerator.is_available", "torch.accelerator.current_accelerator",
    "torch.no_grad", "torch.inference_mode", "torch.enable_grad", "torch.autocast", "torch.amp.autocast",
    "collections.namedtuple", "collections.OrderedDict", "typing.NamedTuple", "dataclasses.dataclass",
    "dataclasses.field", "functools.wraps", "functools.partial", "functools.cache", "functools.lru_cache",
    "math.sqrt", "math.log", "math.exp", "math.prod", "math.ceil", "math.floor",
}
PROPERTY_PARTS = {"setter", "getter", "deleter"}
# methods Python would call on the student's behalf while a later class is being defined
DEFINITION_HOOKS = {"__init_subclass__", "__set_name__", "__class_getitem__", "__mro_entries__", "__prepare__"}


class Definitions:
    """Keeps the statements of a student's cell that only define names (see the module docstring).

    `trusted` are the names bound by the instructor's cells and the builtins: a student's definition may
    not rebind them (`isinstance = lambda *a: True` would change what the tests themselves compute).
    `modules` are names bound by imports: calling something found through them runs only installed
    code, so a constant expression may do that.
    """

    def __init__(self):
        self.modules: dict[str, str] = {}  # name → the module or object it was imported as
        self.trusted: set[str] = set(dir(builtins))
        self.left_out: list[str] = []  # what was not kept, for the diagnostic of a NameError
        self.student: set[str] = set()  # names the kept student statements bind, imports aside

    def trust(self, source):
        """An instructor's cell: every name it binds is trusted; its imports are modules."""
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.modules.update(_imported(node))
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.trusted.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                self.trusted.add(node.name)
        self.trusted |= set(self.modules)

    def keep(self, source) -> ast.Module:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return ast.Module(body=[], type_ignores=[])
        body = []
        for node in tree.body:
            if self._kept(node):
                body.append(node)
                self._bind(node)
            else:
                self.left_out.extend(_targets(node))
        return ast.Module(body=body, type_ignores=[])

    def _bind(self, node):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self.modules.update(_imported(node))
            self.student -= _bound_by_import(node)
        else:
            for name in _targets(node):
                self.modules.pop(name, None)
                self.student.add(name)

    def _kept(self, node) -> bool:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.ImportFrom) and (node.module == "__future__" or node.level):
                return False
            names = _bound_by_import(node)
            return "*" not in names and not (names & (self.trusted - set(self.modules)))
        if any(name in self.trusted for name in _targets(node)):
            return False
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return self._function(node)
        if isinstance(node, ast.ClassDef):
            return self._class(node)
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            return node.value is not None and all(_plain_target(t) for t in targets) and self._safe(node.value)
        return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)  # a docstring

    def _function(self, node) -> bool:
        arguments = node.args
        defaults = [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
        return all(self._decorator(d) for d in node.decorator_list) and all(self._safe(d) for d in defaults)

    def _class(self, node) -> bool:
        if node.keywords or not all(self._decorator(d) for d in node.decorator_list):
            return False
        if not all(self._safe(base) for base in node.bases):
            return False
        kept = []
        for statement in node.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name in DEFINITION_HOOKS:
                continue
            if isinstance(statement, ast.Pass) or self._kept_in_class(statement):
                kept.append(statement)
        node.body = kept or [ast.Pass()]
        return True

    def _kept_in_class(self, statement) -> bool:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return self._function(statement)
        if isinstance(statement, ast.ClassDef):
            return self._class(statement)
        if isinstance(statement, ast.AnnAssign) and statement.value is None:
            return _plain_target(statement.target)  # an annotation alone (not evaluated)
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            return all(_plain_target(t) for t in targets) and self._safe(statement.value)
        return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)

    def _decorator(self, node) -> bool:
        if isinstance(node, ast.Name) and node.id in SAFE_DECORATORS:
            return True
        if isinstance(node, ast.Attribute) and node.attr in PROPERTY_PARTS and isinstance(node.value, ast.Name):
            return True  # @name.setter: property's own method
        if isinstance(node, ast.Call):
            return self._safe(node)
        return self._dotted(node) in INSTALLED_CALLS

    def _dotted(self, node) -> str | None:
        """The full name of an imported object or public attribute of one (`nn.Module` → torch.nn.Module)."""
        parts = []
        while isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                return None
            parts.append(node.attr)
            node = node.value
        if not (isinstance(node, ast.Name) and node.id in self.modules):
            return None
        return ".".join([self.modules[node.id], *reversed(parts)])

    def _safe(self, node) -> bool:
        """Evaluating `node` runs no code of the student's and changes no state: constants, names, public
        attributes, operators, and calls of the builtins and installed callables listed above."""
        if isinstance(node, ast.Lambda):
            arguments = node.args
            return all(self._safe(d) for d in [*arguments.defaults, *filter(None, arguments.kw_defaults)])
        if isinstance(node, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await, ast.ListComp, ast.SetComp,
                             ast.DictComp, ast.GeneratorExp, ast.Starred)):
            return False
        if isinstance(node, ast.Attribute) and node.attr.startswith("__"):
            return False  # `torch.__dict__`, `f.__globals__`
        if isinstance(node, ast.Call):
            func = node.func
            builtin = isinstance(func, ast.Name) and func.id in SAFE_BUILTINS
            if not (builtin or self._dotted(func) in INSTALLED_CALLS):
                return False
        if isinstance(node, ast.Subscript) and not (self._dotted(node.value) or
                                                    isinstance(node.value, (ast.Tuple, ast.List, ast.Dict, ast.Constant))):
            return False  # a student class's __class_getitem__
        return all(self._safe(child) for child in ast.iter_child_nodes(node))


def _imported(node) -> dict[str, str]:
    """name → what it names, for the names an import binds (`import torch.nn as nn` → torch.nn)."""
    if isinstance(node, ast.Import):
        return {alias.asname or alias.name.split(".")[0]: alias.name if alias.asname else alias.name.split(".")[0]
                for alias in node.names}
    return {alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names}


def _bound_by_import(node) -> set[str]:
    if isinstance(node, ast.Import):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return {alias.asname or alias.name for alias in node.names}


def _targets(node) -> list[str]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return sorted(_bound_by_import(node))
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return [n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)]


def _plain_target(node) -> bool:
    """`x = ...` or `x, y = ...`: never `torch.Tensor.to = ...` or `table[key] = ...`."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_plain_target(e) for e in node.elts)
    return isinstance(node, ast.Name)


def run(cells, timeout, grader_fd, sandboxed=False):
    """Run the cells in order (see the module docstring); a JSON line per test cell on `grader_fd`.
    A test cell marked `sealed` runs as a caller and a judge (autograder/boundary.py)."""
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    definitions = Definitions()
    spared = _processes() if sandboxed else set()  # the sandbox's init, its holder, this process
    for cell in cells:
        if cell["kind"] == "trusted":
            definitions.trust(cell["source"])
            _execute(cell["source"], namespace, f"<{cell.get('grade_id', 'cell')}>")
        elif cell["kind"] == "student":
            kept = definitions.keep(cell["source"])
            for statement in kept.body:  # one by one: a definition that fails leaves the others
                _execute(ast.Module(body=[statement], type_ignores=[]), namespace, "<submission>")
        else:
            judged = _judged(namespace, definitions.student) if cell.get("sealed") else None
            result = run_test(cell, namespace, timeout, definitions.left_out, judged, definitions.student)
            if sandboxed:
                _end_stragglers(spared)
            result["grade_id"] = cell["grade_id"]
            os.write(grader_fd, (json.dumps(result) + "\n").encode())


def _execute(code, namespace, filename):
    try:
        exec(compile(code, filename, "exec", flags=ANNOTATIONS, dont_inherit=True), namespace)
    except BaseException:  # noqa: BLE001: a definition that cannot run is simply not there
        pass


def _judged(namespace, student) -> dict:
    """The judge's namespace: the student's functions and classes are stubs it never calls."""
    from .boundary import stub

    return {name: stub(name) if name in student and callable(value) else value for name, value in namespace.items()}


def run_test(cell, namespace, timeout, left_out, judged=None, student=()) -> dict:
    """One test cell in a forked child; its result, or why it has none (died, timed out). With `judged`
    (the judge's namespace) the cell is sealed: a caller child runs the student's functions and sends
    their results to the judge child, which runs the checks and alone writes the result; `student`, the
    names the student's definitions bind: a call crosses to the caller when it involves one of them."""
    reader, writer = os.pipe()
    pids = []
    if judged is not None:
        calls, results = os.pipe()
        pids.append(os.fork())
        if pids[-1] == 0:
            _child(cell, namespace, results, left_out, role="caller", student=student)  # never returns
        os.close(results)
        pids.append(os.fork())
        if pids[-1] == 0:
            _child(cell, judged, writer, left_out, calls=calls, student=student)  # never returns
        os.close(calls)
    else:
        pids.append(os.fork())
        if pids[-1] == 0:
            _child(cell, namespace, writer, left_out)  # never returns
    os.close(writer)
    received, deadline, timed_out = b"", time.monotonic() + timeout, False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        if not select.select([reader], [], [], left)[0]:
            timed_out = True
            break
        chunk = os.read(reader, 65536)
        if not chunk:
            break
        received += chunk
        if len(received) > RESULT_LIMIT:
            break
    os.close(reader)
    for pid in pids:
        _kill(pid)
    if timed_out:
        return {"passed": False, "key": "timed_out"}
    try:
        result = json.loads(received)
        if result["passed"] is True:
            return {"passed": True}
        return {"passed": False, "message": render(result, cell["source"]), **diagnosis(result)}
    except (ValueError, KeyError, TypeError, AttributeError):
        return {"passed": False, "key": "kernel_died"}  # it ended without a result: exit, crash, limit


def _kill(pid):
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _processes() -> set[int]:
    return {int(entry) for entry in os.listdir("/proc") if entry.isdigit()}


def _end_stragglers(spared):
    """Kill what a test left running (a process of its own session, started by the student's code), so
    that it cannot touch the next test. Only in the sandbox, whose PID namespace holds nothing else:
    the `spared` processes that were there before any test (its init, the holder a forked verdict
    joined, this process) and what the tests started."""
    for pid in _processes() - spared:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                break
        except ChildProcessError:
            break


def _child(cell, namespace, writer, left_out, role="judge", calls=None, student=()):
    """In the forked child: only its pipes stay open, then the test runs. The judge (or a cell that is
    not sealed) writes the result on `writer`; a sealed cell's caller sends each call's result to the
    judge on `writer` instead, and what it makes of the cell is dropped."""
    try:
        os.setpgid(0, 0)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        kept = sorted({writer, calls} - {None})
        for low, high in zip([2, *kept], [*kept, 65536]):
            os.closerange(low + 1, high)
        sys.stdin = open(0, closefd=False)
        sys.stdout = sys.stderr = open(1, "w", closefd=False)
        if role == "caller" or calls is not None:
            from . import boundary
            from .checks import core

            students = [namespace[name] for name in student if callable(namespace.get(name))]
            core.boundary = boundary.Recorder(writer, students) if role == "caller" else boundary.Judge(calls, students)
        result = _test(cell, dict(namespace), left_out)
        if role == "judge":
            os.write(writer, json.dumps(result).encode()[:RESULT_LIMIT])
    finally:
        os._exit(0)


def _test(cell, namespace, left_out) -> dict:
    """Run the test; a failure comes back as its message key and typed fields, never as text."""
    try:
        exec(compile(cell["source"], f"<test {cell['grade_id']}>", "exec", dont_inherit=True), namespace)
    except AssertionError as failure:  # a check's (messages.diagnostic), or a bare `assert` of a test
        fields = getattr(failure, "course_fields", None)
        if not isinstance(fields, dict):
            return {"passed": False, "key": "verdict_failed"}
        if getattr(failure, "course_typed", False):  # a sealed call's diagnostic, as its caller sent it
            return {"passed": False, "key": failure.course_key, "fields": fields}
        return {"passed": False, "key": getattr(failure, "course_key", "verdict_failed"),
                "fields": {name: _typed(value) for name, value in fields.items()}}
    except NameError as error:
        name = getattr(error, "name", None) or ""
        key = "verdict_left_out" if name in left_out else "verdict_not_defined"
        return {"passed": False, "key": key, "fields": {"name": {"str": name}}}
    except BaseException as error:  # noqa: BLE001: SystemExit, KeyboardInterrupt, a test's own error
        return {"passed": False, "key": "verdict_raised", "fields": {"error": {"str": type(error).__name__}}}
    return {"passed": True}


def _typed(value) -> dict:
    """A diagnostic's field as a typed value the parent can check (see `render`)."""
    import torch

    from .messages import Bilingual, fixed_texts

    if isinstance(value, Bilingual):
        return {"text": fixed_texts().get(value.en, "")}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value)}
    if isinstance(value, (bool, int, float)):
        return {"number": value}
    if isinstance(value, (tuple, list, torch.Size)) and all(type(v) is int for v in value):
        return {"shape": list(value)}
    return {"str": str(value)[:400]}


# What a diagnostic may carry from the test's child, whose process the student's code shares: the grader
# renders the text itself, from devices, dtypes, numbers, shapes and fixed hints, and from strings whose
# every word is a word of the test cell itself (its names, its labels, the calls it describes), of
# Python's and PyTorch's type names, a number, a device or a dtype. So feedback carries no hidden test,
# however the student's code tries: a word the test does not contain is shown as "…".
DEVICE = re.compile(r"(cpu|meta|cuda|mps)(:\d{1,2})?")
NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?|nan|inf")
SEPARATORS = re.compile(r"[\s,()\[\]{}'\"=:<>#/→…+*-]*")
FIELD_LIMIT = 240  # characters of one field
# A field other than the call's label (`what`, which the test itself builds) may not repeat this many words
# in a row (numbers aside) of the cell's hidden tests that its visible part does not hold: a string the
# student's code returned or raised, read from the test's own frame, would carry a hidden test out.
HIDDEN_RUN = 4


def render(result, source) -> str:
    """The bilingual text of a test's failure, built here from the parts that passed their check."""
    from .messages import catalogue, message, text

    key, fields = result.get("key"), result.get("fields") or {}
    if key not in catalogue() or not isinstance(fields, dict):
        return message("verdict_failed")
    words, hidden = _words(source), _hidden_runs(source)
    shown = {}
    for name, typed in fields.items():
        if isinstance(name, str) and name.isidentifier() and isinstance(typed, dict) and len(typed) == 1:
            shown[name] = _field(name, *typed.items(), words, text, hidden)
    try:
        return message(key, **shown)
    except (KeyError, IndexError, ValueError, AttributeError):
        return message("verdict_failed")


def diagnosis(result) -> dict:
    """The message key of a test's failure and of its hint, each only if it is one of the catalogue's:
    what `course insights` counts (the grader stores them with the test cell)."""
    from .messages import catalogue

    key, fields = result.get("key"), result.get("fields") or {}
    if not isinstance(key, str) or key not in catalogue() or not isinstance(fields, dict):
        return {"key": "verdict_failed"}
    hint = fields.get("hint")
    hint = hint.get("text") if isinstance(hint, dict) and len(hint) == 1 else None
    return {"key": key, **({"hint": hint} if isinstance(hint, str) and hint in catalogue() else {})}


def _field(name, item, words, text, hidden=frozenset()):
    kind, value = item
    if kind == "text" and isinstance(value, str) and value:
        try:
            return text(value)
        except KeyError:
            return "…"
    if kind == "device" and isinstance(value, str) and DEVICE.fullmatch(value):
        return value
    if kind == "dtype" and isinstance(value, str) and value in _dtypes():
        return value
    if kind == "number" and type(value) in (int, float, bool):
        return value
    if kind == "shape" and isinstance(value, list) and len(value) <= 8 and all(type(v) is int for v in value):
        return tuple(value)
    if kind == "str" and name == "error" and isinstance(value, str):
        # the exception's type, and of its text only PyTorch's own words for a mistake the checks know
        kind_name, _, rest = value.partition(": ")
        if not re.fullmatch(r"[A-Za-z_]\w{0,39}", kind_name):
            return "…"
        known = _known_error(rest)
        return f"{kind_name}: {known} …" if known else kind_name
    if kind == "str" and isinstance(value, str) and len(value) <= FIELD_LIMIT:
        pieces = re.split(r"([\w.]+)", value)  # separators and words, alternately
        if all(SEPARATORS.fullmatch(p) for p in pieces[0::2]) and all(_known(w, words) for w in pieces[1::2]) \
                and (name == "what" or not _runs(value) & hidden):
            return value
    return "…"


def _hidden_runs(source) -> set:
    """The runs of HIDDEN_RUN words of the cell's hidden tests that its visible part does not hold."""
    visible, _, rest = source.partition("### BEGIN HIDDEN TESTS")
    hidden, _, after = rest.partition("### END HIDDEN TESTS")
    return _runs(hidden) - _runs(f"{visible}\n{after}")


def _runs(text) -> set:
    words = [word for word in re.findall(r"\w+", text) if not word.isdigit()]
    return {tuple(words[i:i + HIDDEN_RUN]) for i in range(len(words) - HIDDEN_RUN + 1)}


def _known(word, words) -> bool:
    return (NUMBER.fullmatch(word) or DEVICE.fullmatch(word) or word in _dtypes()
            or all(part in words or part.isdigit() for part in word.split(".") if part))


def _words(source) -> set:
    """The words a diagnostic may use: those of the test cell, and the names of Python's and PyTorch's
    types and of the course's checks (what a message names as expected or found)."""
    import torch

    from . import checks

    modules = [checks, *(module for name, module in sys.modules.items() if name.startswith(f"{checks.__name__}."))]
    return (set(re.findall(r"\w+", source)) | set(dir(builtins)) | set(dir(torch)) | set(dir(torch.nn))
            | {name for module in modules for name in dir(module)} | PARAMETER_NAMES
            | {"device", "type", "index", "tensor", "ndarray", "NoneType", "OrderedDict", "mask", "module"})


# what torch.nn's layers call their parameters and buffers ("body.0.weight", "bn.running_mean")
PARAMETER_NAMES = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked", "in_proj_weight",
                   "in_proj_bias", "out_proj", "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"}


def _dtypes() -> set:
    import torch

    return {str(v) for v in vars(torch).values() if isinstance(v, torch.dtype)}


def _known_error(text) -> str | None:
    """The words of PyTorch's error message that a check knows (checks.KNOWN_ERRORS), if any."""
    from .checks import KNOWN_ERRORS

    found = next(filter(None, (pattern.search(text) for pattern, _ in KNOWN_ERRORS)), None)
    return found.group(0) if found else None


def _not_dumpable():
    """No process of the sandbox may open this one's descriptors through /proc or ptrace it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


def main():
    grader_fd, job_path = int(sys.argv[1]), sys.argv[2]
    with open(job_path, encoding="utf-8") as file:
        job = json.load(file)
    os.unlink(job_path)
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # is_available() does not start CUDA before a fork
    _not_dumpable()
    from .kernel import limit_resources, own_session_keyring

    own_session_keyring()
    limit_resources(job.get("memory_bytes"), job.get("cpu_seconds"))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # what the instructor's cells print goes nowhere; records go to grader_fd
        os.dup2(null, fd)
    run(job["cells"], job["timeout"], grader_fd, sandboxed=job.get("sandboxed", False))


if __name__ == "__main__":
    main()
