"""nbgrader plugins: autograde's preprocessors (autograde.py), the feedback page (feedback.py) and the
formgrader's view of a submission (formgrade.py), with their templates (templates/)."""
