"""What runs in a student's or a grading kernel: the checks, the devices they run on, the bilingual
messages, the lessons' probes, recipes and self-checks, a grading kernel's start-up and the verdict. Shipped whole
in the student bundle; it never imports the instructor's `course` package (tests/unit/test_layout.py).

The names below are imported on first use, so that `course` and every nbgrader command (whose
configuration imports `course.kernels.sandbox`) start without importing PyTorch.
"""
import importlib

_EXPORTS = {"grading_devices": "devices", "has_data": "devices", "same_device": "devices",
            "message": "messages", "text": "messages"}
__all__ = list(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
