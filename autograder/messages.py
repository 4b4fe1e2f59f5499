"""The bilingual message catalogue: every text a test or grader shows lives in messages.json."""
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

LANGUAGES = ("en", "zh")


@dataclass(frozen=True)
class Bilingual:
    """A text in both languages; formats into the matching language of a template."""
    en: str
    zh: str

    def __str__(self):
        return f"{self.en}\n{self.zh}"


@cache
def catalogue() -> dict:
    return json.loads(resources.files(__package__).joinpath("messages.json").read_text("utf-8"))


def text(key: str, **fields) -> Bilingual:
    """The message `key` with `fields` filled in; Bilingual fields fill in language by language."""
    entry = catalogue()[key]
    return Bilingual(*(_fill(entry[lang], lang, fields) for lang in LANGUAGES))


def message(key: str, **fields) -> str:
    """The message as shown to a person: the English line, then the Chinese line."""
    return str(text(key, **fields))


def _fill(template: str, lang: str, fields: dict) -> str:
    return template.format(**{k: getattr(v, lang) if isinstance(v, Bilingual) else v
                              for k, v in fields.items()})


def fingerprint(key: str) -> Bilingual:
    """The longest fixed stretch of each language's template: proof that a text shows this message."""
    entry = catalogue()[key]
    pieces = {lang: max(re.split(r"\{[^}]*\}", entry[lang]), key=len).strip() for lang in LANGUAGES}
    return Bilingual(**pieces)


def shows(shown: str, key: str) -> bool:
    """Whether `shown` contains message `key` in both languages."""
    mark = fingerprint(key)
    return mark.en in shown and mark.zh in shown
