"""Text from a submission on the instructor's terminal: shown, never obeyed.

A file name, a student id (a folder's name), an output line or an error message can carry escape sequences
(OSC 52 writes the clipboard, others move the cursor, retitle the window or hide what follows) and
characters that reorder or break what is shown. `visible` writes each of them as its Python escape
(`\\x1b`, `\\u202e`), so the instructor sees it and the terminal does nothing.
"""
import re

# what a terminal acts on instead of showing: C0 controls (tab and newline too, unless lines are kept),
# DEL, C1 controls, the Unicode line and paragraph separators, and the bidirectional embeddings,
# overrides and isolates that reorder what follows them
_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
CONTROL = re.compile(f"[\t\n{_CONTROL}]")
CONTROL_BUT_LINES = re.compile(f"[{_CONTROL}]")


def visible(text, keep_lines: bool = False) -> str:
    """`text` with every control character written as its escape; `keep_lines` keeps newlines and tabs."""
    pattern = CONTROL_BUT_LINES if keep_lines else CONTROL
    return pattern.sub(lambda found: found.group().encode("unicode_escape").decode("ascii"), str(text))
