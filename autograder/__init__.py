"""What runs in a student's or a grading kernel. Shipped whole in the student bundle; it never imports the
instructor's `course` package (tests/unit/test_layout.py). What is where: README, "Layout".

The names below are imported on first use, so that `course` and every nbgrader command (whose
configuration imports `course.kernels.sandbox`) start without importing PyTorch.
"""
import importlib
import sys

_EXPORTS = {"grading_devices": "devices", "has_data": "devices", "message": "messages", "text": "messages"}
__all__ = list(_EXPORTS)

# The instructor's modules that lived in this package until they moved to `course` (issue 24), with where
# they are now: a course folder's nbgrader_config.py made before then still imports them (README,
# "Upgrading a course folder").
MOVED = {
    "autograder.grading": "`course.plugins.autograde`",
    "autograder.feedback": "`course.plugins.feedback`",
    "autograder.formgrade": "`course.plugins.formgrade`",
    "autograder.sandbox": "`course.kernels.sandbox` (`use_for_nbgrader`, `GradingKernelManager`: `course.kernels.manager`)",
}  # as text (in backticks), which the layout test does not take for an import of `course`


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _MovedToCourse:
    """Importing a moved module stops the command with the one-line fix. SystemExit, not ImportError:
    nbgrader logs an error in a configuration file and goes on without the file, which would grade
    without the course's sandbox and verdict. Asked last (after the path finders), only for those names."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name in MOVED:
            from .messages import message

            raise SystemExit(message("moved_to_course", old=name, new=MOVED[name]))
        return None


if not any(isinstance(finder, _MovedToCourse) for finder in sys.meta_path):
    sys.meta_path.append(_MovedToCourse())
