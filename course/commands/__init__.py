"""The `course` subcommands, one module each: its help line, its arguments and what it runs.

    demo      grade the bundled demo class with plain nbgrader commands and show the results
    report    what the tests catch in the mistake corpus, answer by answer
    setup     register every assignment (and roster.csv) in the gradebook
    status    what still waits for grading by hand
    grade     autograde a class, several submissions at a time (the work: course/grade.py)
    merge     bring the shards' autograded/ folders back into one course folder
    insights  what the class got wrong, per exercise and diagnostic
    view      monolingual copies of notebooks
"""
NAMES = ("demo", "report", "setup", "status", "grade", "merge", "insights", "view")


def say(en, zh):
    """One line in English, then the same in Chinese."""
    print(en)
    print(zh, flush=True)
