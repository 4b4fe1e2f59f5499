"""nbgrader configuration for the course: plain `nbgrader ...` commands work from this folder."""
c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "torch-to"

# With a roster (roster.csv beside this file, registered by `course setup`), autograde refuses
# submissions from anyone not on it instead of silently adding them as new students.
import os  # noqa: E402

ROSTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "roster.csv")
if os.path.exists(ROSTER):
    c.Autograde.create_student = False

# The environment variables that override a setting (README, "Environment variables"), read in one place
# (course/settings.py): COURSE_DB_URL (a shared gradebook for grading on a cluster, README "Beyond one machine",
# e.g. postgresql+psycopg://grader:PASSWORD@db/gradebook; unset: gradebook.db here), COURSE_NO_SANDBOX=1
# (Sandbox.enabled off) and COURSE_BWRAP (Sandbox.bwrap). Grading kernels never see them.
from course.settings import from_environment  # noqa: E402

from_environment(c)

# `nbgrader collect` from an exchange every student can write (deploy/exchange/): a submission counts only
# when its folder belongs to the Unix user its name claims (another is refused, loudly, and the student's
# own stands), and only its regular files are copied, never through a link (course/plugins/exchange.py).
c.ExchangeFactory.collect = "course.plugins.exchange.CollectOwnRegularFiles"

# Nothing a submission writes reaches the instructor's terminal raw: every nbgrader command's log lines (file
# names, the kernels' output, nbgrader's own messages) show control characters and escape sequences as
# `\x1b`, never obey them (course/terminal.py); nbgrader's formatter otherwise, colours included.
c.Application.logging_config = {"formatters": {"console": {"class": "course.terminal.VisibleLogFormatter"}},
                                "filters": {"few_of_a_kind": {"()": "course.terminal.FewOfAKind"}},
                                "handlers": {"console": {"filters": ["few_of_a_kind"]}}}

# What students see where a solution was: both languages.
c.ClearSolutions.code_stub = {
    "python": "# YOUR CODE HERE / 在此处编写代码\nraise NotImplementedError()",
}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE / 在此处作答"

# A submission that hangs loses only the cell that hangs (autograder/kernel.py: 120 s; `nbgrader validate` too).
from autograder.kernel import CELL_TIMEOUT_S  # noqa: E402

c.Execute.timeout = CELL_TIMEOUT_S
c.Execute.interrupt_on_timeout = True

# A student who deleted a test cell gets it back, so the test still counts (against them if it fails).
c.OverwriteCells.add_missing_cells = True

# Feedback shows every test's result and diagnostic, never the hidden tests' code (nbgrader issue 917).
# No feedback while written answers wait for the formgrader (they would show 0); long diagnostics
# wrap; the page loads nothing from a CDN (its template leaves MathJax out, see course/plugins/templates);
# a student whose roster.csv row says chinese=zh-hant gets it in 繁體.
c.GenerateFeedback.preprocessors = [
    "course.plugins.feedback.RequireHandGrading",
    "course.plugins.feedback.HideHiddenTests",
    "course.plugins.feedback.StudentsChinese",
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    "course.plugins.feedback.WrapDiagnostics",
]
from course.plugins.feedback import TEMPLATE, TEMPLATE_BASEDIRS  # noqa: E402

# Every page built from a submission is sanitised: the formgrader's view of a submission (rendered by
# HTMLExporter) and the feedback pages (FeedbackExporter, a subclass) drop scripts, event handlers,
# `javascript:` links, iframes and active SVG from markdown and from HTML, SVG and JavaScript outputs,
# with nbconvert's own sanitiser: its preprocessor (nbgrader's templates render markdown cells without
# the `sanitize_html` filter), and the filter for what the base templates render; then the course's (below).
# Both pages also have a Content-Security-Policy that runs none of the submission's scripts, should one get
# past the sanitiser, and lets no <base> or form lead elsewhere (the feedback page:
# course/plugins/templates/course_feedback; the formgrader's: course/plugins/formgrade.py).
from course.plugins import formgrade  # noqa: E402

# The course's sanitiser (course/plugins/pages.py) is nbconvert's plus what it leaves open: outputs' metadata
# (an image's sizes, written unquoted by the templates, must be numbers), the HTML that Markdown makes (no
# inline style or page class that could lay the student's content over the page, no remote image, no
# `javascript:` or `data:` link), and every link in a cell marked as the student's, with its address.
c.HTMLExporter.preprocessors = ["course.plugins.pages.SanitizeSubmission"]
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.template_name = formgrade.TEMPLATE
c.HTMLExporter.extra_template_basedirs = formgrade.TEMPLATE_BASEDIRS
c.HTMLExporter.filters = {"formgrade_policy": "course.plugins.formgrade.content_security_policy",
                          "markdown2html": "course.plugins.pages.markdown2html",
                          "course_page_style": "course.plugins.pages.page_style"}
# (configured on a subclass: HTMLExporter itself also renders the formgrader's own pages)
c.GenerateFeedback.exporter_class = "course.plugins.feedback.FeedbackExporter"
c.FeedbackExporter.template_name = TEMPLATE
c.FeedbackExporter.extra_template_basedirs = TEMPLATE_BASEDIRS
# `nbgrader export` warns about every submission whose written answers are not graded yet.
c.ExportApp.plugin_class = "course.plugins.feedback.CsvExportWarningUngraded"

# `nbgrader validate` (and JupyterLab's Validate button) cut every line of a diagnostic at this width,
# nbgrader's default being 90: the fix at the end of a diagnostic (`x = x.to(device)`) would disappear.
c.Validator.width = 500

# Untrusted submissions (README, "Threat model"). Every grading kernel runs in its own bubblewrap
# sandbox (course/kernels/sandbox.py): it sees and writes only its own grading folder, no network, nothing
# it starts outlives it. Autograde's SafeExecute asks for it; this makes nbgrader's own Execute (the one
# `nbgrader validate` runs) do the same. Where the sandbox cannot start, grading refuses to run unless
# it is turned off (c.Sandbox.enabled = False, or COURSE_NO_SANDBOX=1). JupyterLab's kernels are not affected.
from course.kernels.manager import use_for_nbgrader  # noqa: E402

use_for_nbgrader()
# Each grading kernel is forked into its sandbox from a warm fork server that has imported torch once
# (course/kernels/forkserver.py), as the verdicts are: about 2.5 s less per submission than a new process.
# `nbgrader autograde A --GradingKernelManager.fork_server=False` starts every kernel as a new process.
c.GradingKernelManager.fork_server = True

# Every limit of grading is a setting with its default in the class that keeps it; `nbgrader autograde
# --help-all` lists them all. Change one here, e.g.:
#   c.Sandbox.memory_bytes = 4 * 2**30       every process of one sandbox together, where cgroups can be made
#                                            (README, "A kernel bounded as a whole"); keep jobs × it below the
#                                            machine's memory. Also Sandbox.processes, .tmp_bytes, .shm_bytes,
#                                            .folder_bytes (a kernel's copy of its folder), .bwrap
#   c.GradingKernelManager.memory_bytes = …  each process of a kernel alone (RLIMIT_DATA), and .cpu_seconds;
#                                            every kernel first remembers the real PyTorch and course functions
#                                            (tampering is then reported), also under `nbgrader validate`
#   c.DecideGrades.memory_bytes = …          the verdict's, when not the kernel's; and .cpu_seconds, .timeout
#   c.SafeExecute.notebook_timeout = …       the seconds a notebook may run in its kernel (the cells it did not
#                                            reach earn nothing)
#   c.SafeExecute.grading_timeout = …        the seconds one notebook's grading may take, kernel and verdict
#                                            together: past them it is not graded, and the instructor is told

# nbgrader's own autograde pipelines, with three changes: cells with malformed nbgrader metadata or
# claiming unknown grade ids (forged or duplicated test cells) become ordinary cells; a kernel that dies or hangs
# costs only the cells that did not run; and the points of every test cell are decided by the verdict
# process, which the submission's kernel cannot reach (course/plugins/autograde.py: DecideGrades).
from course.plugins.autograde import autograde_pipeline, sanitize_pipeline  # noqa: E402

# a submission is read only within bounds (its size, the values its JSON may hold): past them it is not graded
c.Autograde.exporter_class = "course.plugins.autograde.BoundedSubmission"
c.Autograde.sanitize_preprocessors = sanitize_pipeline()
c.Autograde.autograde_preprocessors = autograde_pipeline()
