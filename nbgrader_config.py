"""nbgrader configuration for the course: plain `nbgrader ...` commands work from this folder."""
c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "torch-to"

# What students see where a solution was: both languages.
c.ClearSolutions.code_stub = {
    "python": "# YOUR CODE HERE / 在此处编写代码\nraise NotImplementedError()",
}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE / 在此处作答"

# A submission that hangs loses only the cell that hangs.
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True

# A student who deleted a test cell gets it back, so the test still counts (against them if it fails).
c.OverwriteCells.add_missing_cells = True

# Feedback shows every test's result and diagnostic, never the hidden tests' code (nbgrader issue 917).
c.GenerateFeedback.preprocessors = [
    "autograder.feedback.HideHiddenTests",
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# Untrusted submissions (README, "Threat model"). Every grading kernel runs in its own bubblewrap
# sandbox (autograder/sandbox.py): it sees and writes only its own grading folder, no network, nothing
# it starts outlives it. Autograde's SafeExecute asks for it; this makes nbgrader's own Execute (the one
# `nbgrader validate` runs) do the same. Where the sandbox cannot start, grading refuses to run unless
# COURSE_NO_SANDBOX=1 is set (`course grade --no-sandbox`). JupyterLab's kernels are not affected.
from autograder.sandbox import use_for_nbgrader  # noqa: E402

use_for_nbgrader()

# Every grading kernel first remembers the real PyTorch and course functions (tampering is then
# reported by the tests) and caps its own memory and CPU time. The same settings apply to
# `nbgrader validate`, so students see tampering reported as the grader will.
from autograder.kernel import kernel_arguments  # noqa: E402

GRADING_MEMORY_BYTES = 6 * 2**30  # per grading kernel (RLIMIT_DATA: also where CUDA is present)
c.Execute.extra_arguments = kernel_arguments(memory_bytes=GRADING_MEMORY_BYTES, cpu_seconds=600)

# nbgrader's own autograde pipelines, with two changes: cells claiming unknown grade ids (forged or
# duplicated test cells) become ordinary cells before OverwriteCells, and a kernel that dies or hangs
# costs only the cells that did not run.
from nbgrader.converters import Autograde  # noqa: E402
from nbgrader.preprocessors import Execute, OverwriteCells  # noqa: E402


def nbgrader_default(trait):
    return Autograde.class_traits()[trait].default()


sanitize = nbgrader_default("sanitize_preprocessors")
sanitize.insert(sanitize.index(OverwriteCells), "autograder.grading.ForgetUnknownCells")
c.Autograde.sanitize_preprocessors = sanitize
c.Autograde.autograde_preprocessors = [
    "autograder.grading.SafeExecute" if preprocessor is Execute else preprocessor
    for preprocessor in nbgrader_default("autograde_preprocessors")
]
