"""`nbgrader collect` for an exchange that every student can write (README, "A class on one shared machine").

nbgrader's exchange lets every user create folders in inbound/, and its collect trusts them: it reads the
student id from the folder's name (so `nbgrader submit --CourseDirectory.student_id=VICTIM` replaces a
classmate's submission, with a warning only) and copies with `shutil.copytree`, which follows symbolic
links (so a link in a submission brings back any file the instructor can read: the hidden tests, a
classmate's work, the gradebook). CollectOwnRegularFiles, configured as nbgrader's collect exchange
class (`ExchangeFactory.collect` in nbgrader_config.py), keeps nbgrader's collect and changes four things:

- a submission counts only when it is a real folder owned by the Unix user its name claims; any other is
  refused with an error, and the claimed student's own newest submission is collected instead;
- only regular files that the submitter owns are copied, never through a link (each file and folder is
  opened relative to its folder, refusing links, so swapping a file for a link mid-copy does not help);
  everything else (links, pipes, devices, another user's files: hard links to them) is left behind, with a
  warning that names it, and the rest of the submission is collected.
- the submission's time (`timestamp.txt`, by which the gradebook measures lateness) is the student's only
  where the exchange agrees: a student may rewrite their own submission after `nbgrader submit`, and a late one
  wrote that they were on time, and another rewrote an on-time placeholder's notebook in place after the due date.
  Where the file says a time more than CLOCK_SLACK before the exchange last saw anything collected change (the
  newest ctime of the submission's folders and files, which no user can set back), or is not written as
  `nbgrader submit` writes it (in the exchange's zone; a folder of that name too), that time is recorded;
- a submission's `submission_secret.txt` that is not one `nbgrader submit` writes (bytes that are not text, a
  folder, none) is replaced by a new one, with a warning: `release_feedback` reads every student's in turn, and one it
  could not read stopped it for the rest of the class.

`--ExchangeCollect.check_owner=False` (nbgrader's own switch) turns the ownership rule off, for exchanges
where files do not belong to their students' Unix users; regular files alone are copied either way.
"""
import datetime
import os
import pwd
import re
import secrets
import shutil
import stat

from dateutil.tz import gettz
from nbgrader.exchange.default import ExchangeCollect
from nbgrader.utils import ignore_patterns, parse_utc

from autograder.messages import message

from ..terminal import visible


class CollectOwnRegularFiles(ExchangeCollect):
    """nbgrader's collect, for submissions whose owner is their student, of regular files only."""

    def init_src(self):
        self.impostors = []  # submissions not owned by the student their name claims (_path_to_record)
        super().init_src()

    def _path_to_record(self, path):
        record = super()._path_to_record(path)
        info = os.lstat(path)
        record["owner"] = user_name(info.st_uid)
        record["genuine"] = not self.check_owner or (
            stat.S_ISDIR(info.st_mode) and record["owner"] == record["username"])
        if not record["genuine"]:
            self.impostors.append(record)
        return record

    def _sort_by_timestamp(self, records):
        # nbgrader collects the first record of each student: their newest genuine submission, if any
        return sorted(records, key=lambda record: (record["genuine"], record["timestamp"]), reverse=True)

    def copy_files(self):
        for record in self.impostors:
            self.log.error(message("collect_not_owner", submission=visible(record["filename"]),
                                   student=visible(record["username"]), owner=visible(record["owner"])))
        self.src_records = [record for record in self.src_records if record["genuine"]]
        super().copy_files()

    def do_copy(self, src, dest, log=None):
        ignored = ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                  max_file_size=self.coursedir.max_file_size, log=self.log)
        owner = os.lstat(src).st_uid if self.check_owner else None
        left, changed = copy_regular_files(src, dest, owner, ignored, group_shared=self.coursedir.groupshared)
        for path in left:
            self.log.warning(message("collect_not_regular", submission=visible(os.path.basename(src)),
                                     path=visible(path)))
        submission = visible(os.path.basename(src))
        zone = gettz(self.timezone)
        recorded = datetime.datetime.fromtimestamp(changed, zone).strftime(self.timestamp_format)
        claimed = keep_the_exchanges_time(dest, recorded, self.timestamp_format, zone)
        if claimed is not None:
            self.log.warning(message("collect_time_of_the_exchange", submission=submission,
                                     claimed=visible(claimed[:60]) or "-", recorded=recorded))
        if not keep_a_readable_secret(dest):
            self.log.warning(message("collect_secret_replaced", submission=submission))


def keep_the_exchanges_time(dest, recorded, form, zone) -> str | None:
    """The student's `timestamp.txt` in the collected `dest`, unless it is not written as `nbgrader submit` writes
    it (`form`, in the exchange's time `zone`), or says a time more than CLOCK_SLACK before `recorded`, when the
    exchange last saw what was collected change, in that form: then `recorded`. Returns what the student's said (""
    for nothing readable) where it was replaced, else None. Both times are read by nbgrader's `parse_utc`, which reads
    a zone it does not know (CST, PST) as UTC, as it then reads the due date; and no more than a line of the file is
    read (the date parser took 39 s for a megabyte), in one of the zone's own names, never a file's."""
    path = os.path.join(dest, "timestamp.txt")
    try:
        with open(path, encoding="utf-8") as file:
            claimed = file.read(100).strip()
        if _written_as(claimed, form, zone) and parse_utc(claimed) >= parse_utc(recorded) - CLOCK_SLACK:
            return None
    except (OSError, ValueError, OverflowError):  # a folder of that name too: nbgrader's next collect opened it
        claimed = ""
    _replace(path, recorded)
    return claimed


def _written_as(claimed, form, zone) -> bool:
    """Whether `claimed` is a time written in `form`, its zone (`%Z` at its end, as nbgrader's) one of `zone`'s names,
    winter's or summer's."""
    stem, _, zone_field = form.rpartition(" ")
    if zone_field != "%Z":  # a course's own form, with no zone's name at its end
        stem, zone_field = form, ""
    written, _, name = claimed.rpartition(" ") if zone_field else (claimed, "", "")
    try:
        read = datetime.datetime.strptime(written, stem)
    except ValueError:
        return False
    return not zone_field or name in {datetime.datetime(read.year, month, 1, tzinfo=zone).strftime("%Z")
                                      for month in (1, 7)}


# what `nbgrader submit` writes as a submission's secret (secrets.token_hex(64)), by which its feedback is named
SECRET = re.compile(r"[0-9a-f]{128}")


def keep_a_readable_secret(dest) -> bool:
    """Whether the collected `dest` holds a secret as `nbgrader submit` writes it; where it does not (bytes that are
    not text, a folder, nothing), a new one: `release_feedback` reads every student's in turn, and one it could not
    read stopped it for the rest of the class. That student's feedback cannot be fetched with their old secret."""
    path = os.path.join(dest, "submission_secret.txt")
    try:
        with open(path, encoding="ascii") as file:
            if SECRET.fullmatch(file.read().strip()):
                return True
    except (OSError, ValueError):
        pass
    _replace(path, secrets.token_hex(64))
    return False


def _replace(path, text):
    """`path`, whatever it was (a file or a folder the student made), becomes a file that holds `text`."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)
    with open(path, "x", encoding="utf-8") as file:
        file.write(text)


# how much earlier than the exchange saw a submission its own time may be: `nbgrader submit` writes the time it
# started, then copies the notebook (a large one, on a slow shared disk, takes a while)
CLOCK_SLACK = datetime.timedelta(minutes=5)


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def copy_regular_files(src, dest, owner, ignored, group_shared=False) -> tuple[list[str], float]:
    """Copy folder `src` to a new folder `dest`: its folders and regular files (of Unix user `owner`,
    unless None), never following a link. Returns what was left behind, as paths relative to `src`, and when what
    was copied last changed (the newest ctime of each folder and file in `src`, each read once it was copied: no user
    can set a ctime back, and a file rewritten in place changes its own, not its folder's; `src` itself is left out,
    since `nbgrader submit` leaves it writable by anyone).
    `ignored(folder, names)` names what not to copy at all (nbgrader's ignore_patterns)."""
    left, changed = [], [0.0]
    folder = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _copy_folder(folder, src, dest, "", owner, ignored, left, group_shared, changed)
    finally:
        os.close(folder)
    return left, changed[0]


# folders below a submission copied at most this deep: each level is a call, and a folder 1,500 deep ended a grading
# step with RecursionError (autograder/program.py lists one as deep as a data set); deeper ones are left behind
DEEPEST = 32
# opened files and folders: never through a link, and a pipe does not block the open
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK


def _copy_folder(folder, src, dest, relative, owner, ignored, left, group_shared, changed):
    os.mkdir(dest)
    os.chmod(dest, 0o2770 if group_shared else 0o755)
    with os.scandir(folder) as scanned:  # entries of the open folder: a renamed path cannot redirect it
        entries = list(scanned)
    skip = set(ignored(os.path.join(src, relative), [entry.name for entry in entries]))
    for entry in sorted(entries, key=lambda e: e.name):
        if entry.name in skip:
            continue
        path = os.path.join(relative, entry.name)
        info = entry.stat(follow_symlinks=False)
        is_folder = stat.S_ISDIR(info.st_mode)
        if (not (is_folder or stat.S_ISREG(info.st_mode)) or (owner is not None and info.st_uid != owner)
                or (is_folder and path.count(os.sep) >= DEEPEST)):
            left.append(path)
            continue
        try:
            opened = os.open(entry.name, _OPEN | (os.O_DIRECTORY if is_folder else 0), dir_fd=folder)
        except OSError:  # replaced by a link (or a pipe) since the listing, or unreadable
            left.append(path)
            continue
        try:
            now = os.fstat(opened)
            if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino) or (not is_folder and _has_holes(opened, now)):
                left.append(path)  # swapped since the listing; or sparse, see _has_holes
            elif is_folder:
                _copy_folder(opened, src, os.path.join(dest, entry.name), path, owner, ignored, left, group_shared,
                             changed)
            else:
                _copy_file(opened, os.path.join(dest, entry.name), now, group_shared)
            changed[0] = max(changed[0], os.fstat(opened).st_ctime)
        finally:
            os.close(opened)


def _has_holes(opened, info) -> bool:
    """Whether the open regular file has holes: `truncate -s 95M` takes no space in the exchange, and its copy writes
    every byte (fifteen such files filled the grader's disk at collect). Honest submissions have none."""
    try:
        return info.st_size > 0 and os.lseek(opened, 0, os.SEEK_HOLE) < info.st_size
    except OSError:  # a file system that cannot say: no holes seen
        return False
    finally:
        os.lseek(opened, 0, os.SEEK_SET)


def _copy_file(source, target, info, group_shared):
    """The open file `source`, as large as it was when it was checked (`info`): a file its owner grew meanwhile (from
    a watcher of its reads) is cut there, so no hole filled since is copied."""
    left = info.st_size
    with os.fdopen(os.dup(source), "rb") as reading, open(target, "xb") as writing:
        while left and (chunk := reading.read(min(1 << 20, left))):
            writing.write(chunk)
            left -= len(chunk)
    permissions = stat.S_IMODE(info.st_mode) & 0o777 | 0o600  # no set-user-ID bit; readable by the instructor
    os.chmod(target, permissions | 0o660 if group_shared else permissions)
