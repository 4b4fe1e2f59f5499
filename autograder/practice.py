"""Self-checks inside the lessons: ungraded, with the graders' bilingual diagnostics, printed, not raised.

A lesson exercise is three cells: the student's cell (a stub that raises NotImplementedError), a check
cell that calls `self_check`, and a collapsed model solution (`jupyter.source_hidden`) that defines the
answer and runs the same check again. Nothing here raises, so a lesson still runs top to bottom with
the exercise unanswered, and the stored output of the solution's check is the verdict "correct".
"""
from .messages import message


def self_check(check) -> None:
    """Run `check()`, a function that calls `autograder.checks` helpers, and print the verdict.

    Returns nothing, so a check cell shows the verdict alone (no `True`/`False` after it)."""
    try:
        check()
    except NotImplementedError:
        print(message("practice_unanswered"))
        return
    except AssertionError as failure:
        print(message("practice_not_yet"))
        print(failure)
        return
    print(message("practice_correct"))
