"""Moved to `course.kernels.sandbox` (issue 24). This old path re-exports it for a course folder whose nbgrader_config.py
still names it; it goes in version 0.2.0 (README, "Upgrading a course folder"). Instructor code: the
student bundle leaves it out (course/authoring/student_bundle.py, MOVED)."""
from course.kernels.sandbox import *  # noqa: F401,F403
from course.kernels.manager import GradingKernelManager, use_for_nbgrader  # noqa: F401
