"""The instructor's side of the course: the `course` command and what it needs, never shipped to students.

    cli.py, settings.py   the command line, and the course folder's nbgrader_config.py loaded once
    grade.py              `course grade`: nbgrader's autograde, several submissions at a time, shards
    classroom.py          the demo class built from the mistake corpora (corpus/) and read back
    insights.py           what a graded class got wrong, per diagnostic (teaches.json: where it is taught)
    plugins/              nbgrader's plugins: autograde's preprocessors, the feedback and formgrader pages
    kernels/              how a grading kernel starts: sandbox, fork server, cgroups, the kernel manager
    authoring/            tools for the course's authors: monolingual views, glossary, the student bundle

What runs inside a student's or a grading kernel is the `autograder` package, which never imports this one.
"""
