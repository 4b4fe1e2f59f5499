"""Self-checks inside the lessons: ungraded, with the graders' bilingual diagnostics, printed, not raised.

A lesson exercise is the student's cell (a stub that raises NotImplementedError), a check cell that
calls `self_check`, and a model solution folded in a markdown `<details>` block (English and Chinese
cells), so that Run All never answers for the student. Nothing here raises: a lesson runs top to bottom
with the exercise unanswered, and its stored check output says "not answered yet".
"""
from .messages import message, text


def self_check(check) -> None:
    """Run `check()`, a function that calls `autograder.checks` helpers, and print the verdict.

    Returns nothing, so a check cell shows the verdict alone (no `True`/`False` after it)."""
    try:
        check()
    except NotImplementedError:
        print(message("practice_unanswered"))
        return
    except AssertionError as failure:
        if getattr(failure, "course_key", None) == "not_answered":  # checks.call met the stub's NotImplementedError
            print(message("practice_unanswered"))
            return
        print(message("practice_not_yet"))
        print(failure)
        return
    print(message("practice_correct"))


def on_a_gpu(key: str, gpus: int = 1) -> None:
    """What a CUDA-only cell shows on a GPU, printed where it cannot run: message `key` of the catalogue,
    a sentence in each language that tests/gpu_claims.py checks on a GPU (its claims name the same key)."""
    intro, shown = text("gpu_only_two" if gpus >= 2 else "gpu_only"), text(key)
    print(f"{intro.en} {shown.en}\n{intro.zh}{shown.zh}")


def pytorch_says(error: BaseException) -> str:
    """PyTorch's own words for `error` on one line, after the version that said them: "PyTorch 2.13.0 says:
    …". A lesson prints the error's type on its own, which every version shares, then this; another version
    may word the message otherwise, so nbval compares only that a message was shown (tests/sanitize.cfg),
    and the stored outputs show the words of the version the course pins."""
    import torch

    return f"PyTorch {torch.__version__.split('+')[0]} says: {' '.join(str(error).splitlines())}"
