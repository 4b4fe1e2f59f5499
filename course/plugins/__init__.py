"""nbgrader plugins: autograde's preprocessors (autograde.py), the feedback page (feedback.py) and the
formgrader's view of a submission (formgrade.py), with their templates (templates/)."""
from traitlets import HasTraits, List


class PagePreprocessor(HasTraits):
    """A preprocessor of an HTML exporter's pipeline (the feedback page, the formgrader's view), mixed in
    before its nbgrader or nbconvert base: the exporter sets `display_data_priority` on every preprocessor
    it runs, so each declares it, as nbgrader's GetGrades does, and traitlets does not warn."""
    display_data_priority = List(config=True)
