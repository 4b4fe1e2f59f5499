"""The bilingual message catalogue: every text a test or grader shows lives in messages.json."""
import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

LANGUAGES = ("en", "zh")
CATALOGUE = Path(__file__).with_name("messages.json")
# The student's choice of script for the Chinese half of every message (README, "Environment variables"):
# `zh-hant` shows messages.json's 繁體 forms; unset or anything else, 简体.
CHINESE_SETTING = "COURSE_CHINESE"
# terminal control sequences and control characters (but newline and tab) of text from a submission
CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Bilingual:
    """A text in both languages; formats into the matching language of a template."""
    en: str
    zh: str

    def __str__(self):
        return f"{self.en}\n{self.zh}"


@cache
def catalogue() -> dict:
    return json.loads(CATALOGUE.read_text("utf-8"))


def chinese_form() -> str:
    """Which of an entry's Chinese forms this environment shows: `zh-hant` when COURSE_CHINESE asks for it."""
    return "zh-hant" if os.environ.get(CHINESE_SETTING, "").strip().lower() == "zh-hant" else "zh"


def text(key: str, **fields) -> Bilingual:
    """The message `key` with `fields` filled in; Bilingual fields fill in language by language."""
    entry = catalogue()[key]
    return Bilingual(_fill(entry["en"], "en", fields), _fill(entry[chinese_form()], "zh", fields))


def message(key: str, **fields) -> str:
    """The message as shown to a person: the English line, then the Chinese line."""
    return str(text(key, **fields))


def _fill(template: str, lang: str, fields: dict) -> str:
    return template.format(**{k: getattr(v, lang) if isinstance(v, Bilingual) else v
                              for k, v in fields.items()})


def diagnostic(key: str, **fields) -> AssertionError:
    """A failed check as the AssertionError students know, carrying its message key and fields: the
    verdict (autograder/verdict.py) sends these, not the text, so that the grader renders the text again
    from parts it has checked."""
    failure = AssertionError(message(key, **fields))
    failure.course_key, failure.course_fields = key, fields
    return failure


@cache
def fixed_texts() -> dict[str, str]:
    """English text → key, for every message without fields (the hints a diagnostic embeds)."""
    return {entry["en"]: key for key, entry in catalogue().items() if "{" not in entry["en"]}


def printable(text: str, limit: int = 4000) -> str:
    """Text from a submission, safe for a terminal, a log and a page: no escape sequences, bounded."""
    text = CONTROL.sub("", str(text))
    return text if len(text) <= limit else text[:limit] + " …"


def typed_field(value) -> dict:
    """A diagnostic's field as a typed value the verdict's parent can check (autograder/diagnostics.py: render)."""
    import torch

    if isinstance(value, Bilingual):
        return {"text": fixed_texts().get(value.en, "")}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value)}
    if isinstance(value, (bool, int, float)):  # as Python's own number: the judge reads plain data only
        return {"number": next(kind(value) for kind in (bool, int, float) if isinstance(value, kind))}
    if isinstance(value, (tuple, list, torch.Size)) and all(type(v) is int for v in value):
        return {"shape": list(value)}
    return {"str": str(value)[:400]}
