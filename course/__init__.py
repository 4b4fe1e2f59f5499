"""The instructor's side of the course: the `course` command and what it needs, never shipped to students.

    cli.py, commands/     the command line, one module per subcommand (commands/grade.py: `course grade`)
    settings.py           the course folder's nbgrader_config.py, loaded once per command
    gradebook.py          the commands' gradebook queries: registered, roster, late work, what waits for a person
    grade.py              the work of `course grade`: nbgrader's autograde, several submissions at a time, shards
    classroom.py          the demo class built from the mistake corpora (corpus/) and read back
    insights.py           what a graded class got wrong, per diagnostic (teaches.json: where it is taught),
                          its costliest misconceptions, and first attempts (attempts/, kept by the grader)
    plugins/              nbgrader's plugins: autograde's preprocessors, the feedback and formgrader pages
    kernels/              how a grading kernel starts: sandbox, fork server, cgroups, the kernel manager
    authoring/            tools for the course's authors: monolingual views, glossary, the student bundle

What runs inside a student's or a grading kernel is the `autograder` package, which never imports this one.
"""
