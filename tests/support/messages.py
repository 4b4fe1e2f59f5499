"""Whether a text shows a message of the catalogue (autograder/messages.json), in both languages: what the
tests assert of diagnostics, logs and pages. Test helpers, so not in the package the students get."""
import re

from autograder.messages import LANGUAGES, Bilingual, catalogue

# diagnostics of the catalogue that say what went wrong but not which point of the course: no one
# section teaches them (tests/unit/test_insights.py, tests/grading/test_insights_demo.py)
GENERIC_DIAGNOSTICS = {"raised", "verdict_call_raised", "wrong_values", "wrong_shape", "not_answered", "expected_error", "expected_none", "not_a_module",
                       "not_a_tensor"}


def fingerprint(key: str) -> Bilingual:
    """The longest fixed stretch of each language's template: proof that a text shows this message."""
    entry = catalogue()[key]
    pieces = {lang: max(re.split(r"\{[^}]*\}", entry[lang]), key=len).strip() for lang in LANGUAGES}
    return Bilingual(**pieces)


def shows(shown: str, key: str) -> bool:
    """Whether `shown` contains message `key` in both languages."""
    mark = fingerprint(key)
    return mark.en in shown and mark.zh in shown
