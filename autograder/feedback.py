"""Moved to `course.plugins.feedback` (issue 24). This old path re-exports it for a course folder whose nbgrader_config.py
still names it; it goes in version 0.2.0 (README, "Upgrading a course folder"). Instructor code: the
student bundle leaves it out (course/authoring/student_bundle.py, MOVED)."""
from course.plugins.feedback import *  # noqa: F401,F403
