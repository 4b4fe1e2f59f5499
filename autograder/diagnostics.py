"""What a failed test cell shows the student: the verdict's parent renders the bilingual text itself, from the
judge's message key and typed fields (autograder/verdict.py), and keeps of each field only what its check
allows. `course insights` counts the keys (`diagnosis`)."""
import ast
import builtins
import re
import sys


# What a diagnostic may carry from the test's child, whose process the student's code shares: the grader
# renders the text itself, from devices, dtypes, numbers, shapes and fixed hints, and from strings whose
# every word is a word of the test cell itself (its names, its labels, the calls it describes), of
# Python's and PyTorch's type names, a number, a device or a dtype. So feedback carries no hidden test,
# however the student's code tries: a word the test does not contain is shown as "…".
# ASCII digits only: Unicode's other digits (９, ①, ²) passed as numbers and carried 210 bytes of a solution per field
# (attacks-slicing.toml, unicode-decimal-digits-pass-as-numbers-210-bytes-per-field)
DEVICE = re.compile(r"(cpu|meta|cuda|mps)(:[0-9]{1,2})?")
NUMBER = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)(e[-+]?[0-9]+)?|nan|inf")
SEPARATORS = re.compile(r"[\s,()\[\]{}'\"=:<>#/→…+*-]*")
FIELD_LIMIT = 240  # characters of one field
# The largest whole number a field shows (a count, a size, a shape's length): an int has no size of its own, and
# one of 614 digits carried 255 bytes of a hidden test out of a failed cell (attacks-slicing.toml,
# loader-kwargs-sends-its-hidden-calls-out-as-one-large-number)
NUMBER_LIMIT = 10**17
# A field other than the call's label (`what`, which the test itself builds) may not repeat this many words or
# numbers in a row of the cell's hidden tests that its visible part does not hold: a string the student's code
# returned or raised, read from the test's own frame, would carry a hidden test out. Numbers count: a hidden line
# that differs from a visible one in its numbers alone (`for rank in [2, 1, 0]:`) showed whole
# (attacks-slicing.toml, save-on-rank-zero-returns-a-hidden-line-of-its-test)
HIDDEN_RUN = 3
# The longest number a string field shows as a word (a count, a size, a float's repr: 0.30000000000000004):
# digits are words of every cell
NUMBER_DIGITS = 17


def render(result, source, visible=None, own=()) -> str:
    """The bilingual text of a test's failure, built here from the parts that passed their check.
    `visible`: the cell as released (DecideGrades removes the hidden tests with nbgrader's own
    delimiters); None: the cell has no hidden part. `own`: the student's cells, whose lines and words an
    error the student's code raised may show."""
    from .messages import catalogue, message, text

    key, fields = result.get("key"), result.get("fields") or {}
    if key not in catalogue() or not isinstance(fields, dict):
        return message("verdict_failed")
    # The test's label (`what`) is the judge's own: it may use every word of the cell. Any other string
    # may hold what the student's code returned, and the caller that made it ran the whole cell: only the
    # words of the cell as released may show (hidden-only words, however interleaved, become "…").
    labels, words = _words(source), _words(source if visible is None else visible)
    hidden = _hidden_runs(source, visible)
    shown, written = {}, Written(own)
    for name, typed in fields.items():
        if name == "lines" and isinstance(typed, dict) and isinstance(typed.get("str"), str):
            line = written.first_line(typed["str"].splitlines())
            if line is not None:  # where the student's code raised, a line the student wrote
                shown["line"] = line
                key = "verdict_call_raised_at" if key == "verdict_call_raised" else key
        elif isinstance(name, str) and name.isidentifier() and isinstance(typed, dict) and len(typed) == 1:
            shown[name] = _field(name, *typed.items(), labels if name == "what" else words, text, hidden, written)
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


class Written:
    """What the student wrote in their cells, which a diagnostic may quote back to them: one of their lines
    (where their code raised), and a string literal of theirs that is an error's whole first line. Never a
    caller's text as it is: the caller ran the test cell, hidden part and all, and could spell anything with
    the student's words, numbers or separators; it can only pick one of the student's own lines or literals
    (a few bits per failed test, README "What a student's code can still misreport")."""

    LITERAL_LIMIT = 200  # characters of a literal the grader quotes

    def __init__(self, sources=()):
        self.lines, self.literals = set(), set()
        for source in sources:
            self.lines |= {line.strip() for line in source.splitlines() if line.strip()}
            self.literals |= _literals(source, self.LITERAL_LIMIT)

    def first_line(self, lines) -> str | None:
        """The first of `lines` that is one of the student's, as the student wrote it."""
        return next((line.strip() for line in lines if line.strip() in self.lines), None)

    def message(self, text) -> str | None:
        """The error's first line, if it is one of the student's string literals; None otherwise."""
        first = text.splitlines()[0].strip() if text else ""
        return first if first in self.literals else None


def _literals(source, limit) -> set:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # a cell with magics: its literals are not quoted
        return set()
    return {node.value.strip() for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and "\n" not in node.value.strip() and 0 < len(node.value.strip()) <= limit}


def _field(name, item, words, text, hidden=frozenset(), written=Written()):
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
    if kind == "number" and (type(value) in (float, bool) or type(value) is int and abs(value) < NUMBER_LIMIT):
        return value
    if kind == "shape" and isinstance(value, list) and len(value) <= 8 \
            and all(type(v) is int and abs(v) < NUMBER_LIMIT for v in value):
        return tuple(value)
    if kind == "str" and name == "error" and isinstance(value, str):
        # the exception's type, and of its text only PyTorch's own words for a mistake the checks know
        kind_name, _, rest = value.partition(": ")
        if not _known_error_type(kind_name):
            kind_name = "Exception"
        known = _known_error(rest)
        if known:
            return f"{kind_name}: {known} …"
        own = written.message(rest)
        return f"{kind_name}: {own}" if own else kind_name
    if kind == "str" and isinstance(value, str) and len(value) <= FIELD_LIMIT:
        pieces = re.split(r"([\w.]+)", value)  # separators and words, alternately
        if all(SEPARATORS.fullmatch(p) for p in pieces[0::2]) and all(_known(w, words) for w in pieces[1::2]) \
                and (name == "what" or not _runs(value) & hidden):
            return value
    return "…"


def _hidden_runs(source, visible) -> set:
    """The runs of HIDDEN_RUN words of the cell's hidden tests that its visible part does not hold."""
    return set() if visible is None else _runs(source) - _runs(visible)


def _runs(text) -> set:
    words = re.findall(r"\w+", text)
    return {tuple(words[i:i + HIDDEN_RUN]) for i in range(len(words) - HIDDEN_RUN + 1)}


def _known(word, words) -> bool:
    if len(re.sub(r"[^0-9]", "", word).lstrip("0")) > NUMBER_DIGITS:  # a long int spells bytes of text
        return False
    return (NUMBER.fullmatch(word) or DEVICE.fullmatch(word) or word in _dtypes()
            or all(part in words or part.isascii() and part.isdigit() for part in word.split(".") if part))


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


def _known_error_type(name) -> bool:
    """An exception type named by Python or PyTorch: a name the student's code chose could carry text."""
    import torch

    found = getattr(builtins, name, None) or getattr(torch, name, None)
    return isinstance(found, type) and issubclass(found, BaseException)


def _known_error(text) -> str | None:
    """The words of PyTorch's error message that a check knows (checks.KNOWN_ERRORS), if any."""
    from .checks import KNOWN_ERRORS

    found = next(filter(None, (pattern.search(text) for pattern, _ in KNOWN_ERRORS)), None)
    return found.group(0) if found else None
