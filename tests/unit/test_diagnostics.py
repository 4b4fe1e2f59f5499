"""What a failed test cell shows the student (autograder/diagnostics.py): the verdict's parent renders the text
from the judge's message key and typed fields, and keeps of each field only what its check allows, so that
nothing the student's code returned or raised can carry a hidden test out."""
import base64

import pytest

from autograder import diagnostics
from autograder.messages import printable
from support.messages import shows

# ------------------------------------------------------------------ an error the student's code raised

OWN = ["import torch\n\ndef double(x):\n    if x.dtype != torch.float32:\n"
       "        raise ValueError('double needs a float32 tensor')\n    return 2 * x  # 0 1 2 3 4 5 6 7 8 9 sep"]
RAISE_LINE = "raise ValueError('double needs a float32 tensor')"
HIDDEN_TEST = ("x = torch.ones(3)\n### BEGIN HIDDEN TESTS\nfor secret_dtype in [torch.float64]:\n"
               "    checks.call('double(x)', double, x.to(secret_dtype))\n### END HIDDEN TESTS\n")


def raised_in_grader(error, lines):
    return diagnostics.render({"key": "verdict_call_raised",
                           "fields": {"what": {"str": "double(x)"}, "error": {"str": error}, "lines": {"str": lines}}},
                          HIDDEN_TEST, "x = torch.ones(3)\n", OWN)


def test_an_error_the_students_code_raised_shows_its_message_and_the_students_line():
    shown = raised_in_grader("ValueError: double needs a float32 tensor",
                             f"{RAISE_LINE}\nchecks.call('double(x)', double, x.to(secret_dtype))")
    assert shows(shown, "verdict_call_raised_at") and "line of yours" in shown
    assert "ValueError: double needs a float32 tensor" in shown and RAISE_LINE in shown


HIDDEN_BYTES = "for secret_dtype".encode()


@pytest.mark.parametrize("error", [
    "ValueError: secret_dtype",  # a word of the hidden test only
    "ValueError: " + " ".join(str(b) for b in HIDDEN_BYTES),  # spelled in numbers the student wrote
    "ValueError: x" + "".join(chr(0x2200 + b) for b in HIDDEN_BYTES) + "x",  # in separators: one word, "x"
    "ValueError: double needs sep a float32 tensor",  # the student's words, not their literal
], ids=["hidden-word", "numbers", "separators", "words-not-literal"])
def test_a_message_that_is_not_one_of_the_students_literals_shows_only_its_type(error):
    shown = raised_in_grader(error, RAISE_LINE)
    assert "ValueError" in shown and error.partition(": ")[2] not in shown and "secret" not in shown


def test_a_quoted_line_is_the_students_own_whatever_the_caller_pads_it_with():
    padding = "".join("\u2000\u3000\t\u00a0"[b % 4] for b in HIDDEN_BYTES)
    shown = raised_in_grader("ValueError: oops", RAISE_LINE + padding)
    assert RAISE_LINE in shown and padding not in shown and "\u2000" not in shown


def test_a_line_the_student_did_not_write_is_not_quoted():
    shown = raised_in_grader("ValueError: double", "for secret_dtype in [torch.float64]:")
    assert shows(shown, "verdict_call_raised") and "secret_dtype" not in shown and "line of yours" not in shown


# ------------------------------------------------------------------ what a diagnostic keeps of its fields

HIDDEN = 'for dtype in [torch.float64, torch.float16]:\n    what = f"to_device(<{dtype} tensor>, {target!r})"'


@pytest.mark.parametrize("fields", [
    {"what": {"str": "to_device(<torch.float64 tensor>, 'meta')"}, "error": {"str": "RuntimeError: " + HIDDEN}},
    {"what": {"str": HIDDEN}, "error": {"str": "ValueError"}},
    {"what": {"str": "to_device(x, 'meta')"}, "error": {"str": base64.b64encode(HIDDEN.encode()).decode()}},
], ids=["in-the-error", "as-the-call", "base64"])
def test_a_diagnostic_is_rendered_from_checked_parts_only(fields):
    shown = diagnostics.render({"key": "raised", "fields": fields}, source=HIDDEN)
    assert "for dtype in" not in shown and base64.b64encode(HIDDEN.encode()).decode()[:12] not in shown
    assert shows(shown, "raised")


def shown_as_found(hidden_line, found):
    """expected_none's diagnostic, rendered for a cell whose hidden part is `hidden_line`, when the string
    the student's code returned (`found`) was read from the test's own frame."""
    source = f"x = 1\n### BEGIN HIDDEN TESTS\n{hidden_line}\n### END HIDDEN TESTS\n"
    return diagnostics.render({"key": "expected_none", "fields": {"what": {"str": "f(x)"}, "found": {"str": found},
                                                      "hint": {"text": "hint_no_tensors"}}}, source, "x = 1\n")


def test_a_field_other_than_the_tests_label_never_repeats_a_hidden_line():
    """A hidden line the student's code returned is not shown; the test's own label keeps its words."""
    line = "class HalfMoved(nn.Module):  # a parameter here, a buffer there"
    shown = shown_as_found(line, f"'{line}'")
    assert "HalfMoved" not in shown and shows(shown, "expected_none")
    source = f"x = 1\n### BEGIN HIDDEN TESTS\n{line}\n### END HIDDEN TESTS\n"
    label = diagnostics.render({"key": "expected_none", "fields": {"what": {"str": "nn.Module(<a parameter here, a buffer there>)"},
                                                       "found": {"str": "'x'"}, "hint": {"text": "hint_no_tensors"}}},
                   source=source)
    assert "nn.Module(<a parameter here, a buffer there>)" in label  # the test's own label keeps its words


def test_a_diagnostic_keeps_the_words_of_its_test_and_its_devices_dtypes_and_numbers():
    fields = {"what": {"str": "to_device(<torch.float64 tensor>, 'meta')"}, "expected": {"dtype": "torch.float64"},
              "found": {"dtype": "torch.float32"}, "hint": {"text": "dtype_hint_keep"}}
    shown = diagnostics.render({"key": "wrong_dtype", "fields": fields}, source=HIDDEN)
    assert "to_device(<torch.float64 tensor>, 'meta')" in shown and "torch.float32" in shown
    assert shows(shown, "wrong_dtype") and shows(shown, "dtype_hint_keep")


def test_text_from_a_submission_loses_its_terminal_escape_sequences():
    forged = "\x1b]52;c;ZXZpbA==\x07\x1b[2K\r✓ all tests passed\x1b]0;title\x07\x00"
    assert printable(forged) == "✓ all tests passed"
    assert len(printable("x" * 10_000)) < 4100


def test_a_string_of_hidden_words_shows_as_dots_however_it_is_interleaved():
    """The caller ran the whole cell: a string it returned may carry hidden words between known ones."""
    shown = shown_as_found("class Sample(namedtuple): image label source nested pairs",
                           "'Sample nan image label nan source nested nan pairs torch'")
    assert "image" not in shown and "Sample" not in shown and shows(shown, "expected_none")


# ------------------------------------------------------------------ the edges mutation testing found (make mutation)

@pytest.mark.parametrize("result", [
    {"key": "no_such_message", "fields": {}},
    {"key": "wrong_values", "fields": [["what", {"str": "x"}]]},
    {"key": "wrong_values", "fields": {}},
    {"key": "expected_none", "fields": {"what": {"str": "f(x)"}, "found": ["'x'"], "hint": {"text": "hint_no_tensors"}}},
], ids=["unknown-message", "fields-not-a-mapping", "fields-missing", "a-field-not-typed"])
def test_a_record_the_grader_cannot_render_as_written_shows_only_that_a_check_failed(result):
    assert shows(diagnostics.render(result, "x = 1"), "verdict_failed")


def test_a_hidden_run_of_words_is_dots_even_when_each_word_is_visible_alone():
    visible = "x = alpha + beta\ny = gamma + delta\n"
    source = visible + "### BEGIN HIDDEN TESTS\nsecret = alpha(beta, gamma, delta)\n### END HIDDEN TESTS\n"
    fields = {"what": {"str": "f(x)"}, "found": {"str": "'alpha beta gamma delta'"}, "hint": {"text": "hint_no_tensors"}}
    shown = diagnostics.render({"key": "expected_none", "fields": fields}, source, visible)
    assert "alpha beta gamma delta" not in shown and shows(shown, "expected_none")
    fields["found"] = {"str": "'gamma delta alpha beta'"}  # the same words, in no hidden order
    assert "gamma delta alpha beta" in diagnostics.render({"key": "expected_none", "fields": fields}, source, visible)


@pytest.mark.parametrize("hidden, visible", [
    ("for rank in [2, 1, 0]:", "for rank in [1, 0]:"),  # a4 save_on_rank_zero's: the numbers alone differ
    ("torch.manual_seed(1)", "torch.manual_seed(0)"),  # a3: the seed of the hidden inputs
], ids=["its-numbers", "a-seed"])
def test_a_hidden_line_that_differs_from_a_visible_one_in_its_numbers_alone_is_dots(hidden, visible):
    """attacks-slicing.toml, save-on-rank-zero-returns-a-hidden-line-of-its-test: the caller returned it."""
    source = f"{visible}\n### BEGIN HIDDEN TESTS\n{hidden}\n### END HIDDEN TESTS\n"
    fields = {"what": {"str": "f(x)"}, "found": {"str": hidden}, "hint": {"text": "hint_no_tensors"}}
    shown = diagnostics.render({"key": "expected_none", "fields": fields}, source, visible + "\n")
    assert hidden not in shown and shows(shown, "expected_none")
    fields["found"] = {"str": visible}
    assert visible in diagnostics.render({"key": "expected_none", "fields": fields}, source, visible + "\n")


def test_the_tests_label_may_use_the_words_of_its_hidden_part():
    visible = "x = 1\n"
    source = visible + "### BEGIN HIDDEN TESTS\nclass HalfMoved: pass\n### END HIDDEN TESTS\n"
    fields = {"what": {"str": "HalfMoved(x)"}, "found": {"str": "'HalfMoved'"}, "hint": {"text": "hint_no_tensors"}}
    shown = diagnostics.render({"key": "expected_none", "fields": fields}, source, visible)
    assert "HalfMoved(x)" in shown and "'HalfMoved'" not in shown


def test_a_device_field_shows_a_device_and_no_other_field_passes_as_one():
    fields = {"what": {"str": "f(x)"}, "expected": {"device": "cuda:0"}, "found": {"dtype": "cpu"}}
    shown = diagnostics.render({"key": "wrong_device", "fields": fields}, "x = 1")
    assert "expected device cuda:0, found …" in shown


def test_an_error_of_pytorchs_own_type_keeps_its_type_and_the_words_a_check_knows():
    error = "RuntimeError: Expected all tensors to be on the same device, but found cuda:0 and cpu (secret_name)"
    shown = diagnostics.render({"key": "raised", "fields": {"what": {"str": "f(x)"}, "error": {"str": error}}}, "x = 1")
    assert "RuntimeError: Expected all tensors to be on the same device …" in shown and "secret_name" not in shown
    torch_own = {"what": {"str": "f(x)"}, "error": {"str": "OutOfMemoryError: tried to allocate"}}
    assert "raised OutOfMemoryError." in diagnostics.render({"key": "raised", "fields": torch_own}, "x = 1")


@pytest.mark.parametrize("device, shown", [("cuda:0", True), ("mps", True), ("meta", True),
                                           ("\u4e00" * 300, False), ("secret_words_of_a_hidden_line", False)],
                         ids=["cuda", "mps", "meta", "ideographs", "a-long-word"])
def test_a_known_errors_words_show_a_device_type_and_nothing_chosen_in_its_place(device, shown):
    """attacks-slicing.toml, known-numpy-error-pattern-carries-any-word-out-of-the-caller: `\\w+` in the pattern let a
    raised error carry 600 bytes of any text as ideographs."""
    error = f"TypeError: can't convert {device} device type tensor to numpy"
    rendered = diagnostics.render({"key": "raised", "fields": {"what": {"str": "f(x)"}, "error": {"str": error}}},
                                  "x = 1")
    assert (device in rendered) is shown


@pytest.mark.parametrize("digits", ["\uff19" * 17, "\u2460\u2461\u2462", "\u00b2\u00b3", "\u0669" * 10],
                         ids=["fullwidth", "circled", "superscript", "arabic-indic"])
def test_only_ascii_digits_pass_as_a_number(digits):
    """attacks-slicing.toml, unicode-decimal-digits-pass-as-numbers-210-bytes-per-field."""
    shown = diagnostics.render({"key": "expected_none", "fields": {"what": {"str": "f(x)"},
                                                                   "found": {"str": f"[{digits}, 7]"}}}, "x = 1")
    assert digits not in shown


def test_only_a_raised_error_gets_the_students_line():
    own = ["def f(x):\n    raise ValueError('no')"]
    fields = {"what": {"str": "f(x)"}, "error": {"str": "ValueError"}, "lines": {"str": "raise ValueError('no')"}}
    assert shows(diagnostics.render({"key": "raised", "fields": fields}, "x = 1", None, own), "raised")


@pytest.mark.parametrize("literal, quoted", [("x", True), ("y" * 200, True), ("y" * 201, False), ("", False)],
                         ids=["one-character", "at-the-limit", "over-the-limit", "empty"])
def test_a_literal_of_the_students_is_quoted_from_one_character_to_the_limit(literal, quoted):
    written = diagnostics.Written([f"raise ValueError({literal!r})"])
    assert written.message(literal) == (literal if quoted else None)


HIDDEN_RUN_OF_THREE = {("a", "b", "c")}
LIMIT_LONG = ("x," * diagnostics.FIELD_LIMIT)[:diagnostics.FIELD_LIMIT]
# (field name, (kind, value) as the judge typed it, what the diagnostic shows): a field is shown only as the
# kind it claims to be, and only if it is that kind; anything else is "…"
FIELDS = {
    "device": ("found", ("device", "cuda:0"), "cuda:0"),
    "not-a-device": ("found", ("device", "the grader's home"), "…"),
    "device-as-dtype": ("found", ("dtype", "cpu"), "…"),
    "dtype": ("found", ("dtype", "torch.float16"), "torch.float16"),
    "dtype-not-a-string": ("found", ("dtype", ["torch.float16"]), "…"),
    "dtype-as-number": ("found", ("number", "torch.float16"), "…"),
    "number": ("found", ("number", 2.5), 2.5),
    "number-as-str": ("found", ("str", 5), "…"),
    "number-not-a-number": ("found", ("number", "x"), "…"),
    "number-of-seventeen-digits": ("found", ("number", -(10**17 - 1)), -(10**17 - 1)),
    "number-of-eighteen-digits": ("found", ("number", 10**17), "…"),  # a long int carries bytes of text
    "number-of-614-digits": ("found", ("number", int.from_bytes(b"\xff" * 255, "big")), "…"),
    "shape": ("found", ("shape", [2, 3]), (2, 3)),
    "shape-of-eight": ("found", ("shape", [1] * 8), (1,) * 8),
    "shape-of-nine": ("found", ("shape", [1] * 9), "…"),
    "shape-of-floats": ("found", ("shape", [2.0]), "…"),
    "shape-as-number": ("found", ("number", [1]), "…"),
    "shape-of-a-long-int": ("found", ("shape", [2, 10**17]), "…"),
    "unknown-hint": ("hint", ("text", "no_such_message"), "…"),
    "error-type-and-colons": ("error", ("str", "ValueError: no: really"), "ValueError"),
    "error-of-an-unknown-type": ("error", ("str", "MyOwnError: x"), "Exception"),
    "error-pytorch-knows": ("error", ("str", "RuntimeError: Expected all tensors to be on the same device, x"),
                            "RuntimeError: Expected all tensors to be on the same device …"),
    "str-at-the-limit": ("found", ("str", LIMIT_LONG), LIMIT_LONG),
    "str-over-the-limit": ("found", ("str", LIMIT_LONG + "x"), "…"),
    "label-with-a-hidden-run": ("what", ("str", "a b c d"), "a b c d"),
    "found-with-a-hidden-run": ("found", ("str", "a b c d"), "…"),
    "found-without-one": ("found", ("str", "b a c d"), "b a c d"),
    "found-with-a-float-of-seventeen-digits": ("found", ("str", "[0.30000000000000004]"), "[0.30000000000000004]"),
    "found-with-a-number-of-eighteen-digits": ("found", ("str", "[" + "9" * 18 + "]"), "…"),
}


@pytest.mark.parametrize("name, item, shown", FIELDS.values(), ids=FIELDS.keys())
def test_a_field_shows_only_as_what_it_claims_to_be(name, item, shown):
    from autograder.messages import text

    words = diagnostics._words("x = 1") | {"a", "b", "c", "d"}
    assert diagnostics._field(name, item, words, text, HIDDEN_RUN_OF_THREE) == shown


def test_the_words_a_diagnostic_may_use_are_pythons_pytorchs_and_the_checks():
    allowed = diagnostics._words("")
    assert {"len", "float16", "Linear", "assert_values", "running_mean"} <= allowed
    assert {"index", "ndarray", "OrderedDict", "mask", "module"} <= allowed  # named by messages, not by a library


def test_every_cell_of_the_student_is_theirs_to_quote():
    written = diagnostics.Written(["raise ValueError('first')", "y = 2"])
    assert written.first_line(["raise ValueError('first')"]) == "raise ValueError('first')"
    assert written.message("first") == "first"
