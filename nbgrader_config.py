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
