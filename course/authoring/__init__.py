"""Tools for the course's authors: monolingual copies of the bilingual notebooks (monolingual.py), the
glossary their Chinese follows (glossary.py), and the student bundle (student_bundle.py)."""
