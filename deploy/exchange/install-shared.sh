#!/bin/sh
# The course's environment for every user of one shared machine (README, "A class on one shared machine").
# Run as root, once per course version:   make shared-install PREFIX=/opt/torch-to
#                                     or: deploy/exchange/install-shared.sh PREFIX [REQUIREMENT ...]
#   PREFIX       where the environment goes: every user can run it, and it holds no solution and no test
#   REQUIREMENT  extra pip requirements; `make shared-install` passes the grader's torch (torch==2.13.0)
#   PYTHON       a Python every user can run (default /usr/bin/python3.11; not one in a private home, as
#                pyenv's in root's home would be: then every other user gets "Permission denied")
#   PROFILE_D    the folder whose scripts login shells read (default /etc/profile.d): puts PREFIX/bin,
#                and so `nbgrader`, `jupyter` and `course`, on every user's PATH
set -eu
prefix=${1:?"usage / 用法: $0 PREFIX [REQUIREMENT ...]"}
shift
python=${PYTHON:-/usr/bin/python3.11}
profile_d=${PROFILE_D:-/etc/profile.d}
checkout=$(cd "$(dirname "$0")/../.." && pwd)
umask 022

"$python" -m venv "$prefix"
# pip builds a project inside its folder (setuptools writes build/ and *.egg-info there): build from a private
# copy of what the package is made of, so that root leaves no files of its own in the instructor's checkout
# and two installs at once (CI's two builds) don't race in one build/ ("File exists: build/bdist...").
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
cp -R "$checkout/pyproject.toml" "$checkout/README.md" "$checkout/autograder" "$checkout/course" "$staging"
rm -r "$staging/course/corpus"  # every user can read PREFIX, and the corpora hold right answers to every exercise
# Not editable: pip copies the `autograder` and `course` packages into PREFIX, so the checkout, with source/
# (solutions, hidden tests) and course/corpus/ (the mistake corpora), can stay private to the instructor (chmod 700).
"$prefix/bin/pip" install --quiet --disable-pip-version-check "$staging[hub]" "$@"
# the Jupyter configuration of students' and instructors' hub servers, readable by every user
# (deploy/jupyterhub/jupyterhub_config.py takes it from here when it is here)
rm -rf "$prefix/share/torch-to"  # a run for a new course version replaces the old copy
install -d -m 0755 "$prefix/share/torch-to"
cp -R "$checkout/deploy/student/etc/jupyter" "$prefix/share/torch-to/student-jupyter"
cp -R "$checkout/deploy/jupyterhub/instructor" "$prefix/share/torch-to/instructor-jupyter"
chmod -R a+rX "$prefix"

install -d -m 0755 "$profile_d"
printf 'PATH="%s/bin:$PATH"\nexport PATH\n' "$prefix" > "$profile_d/torch-to.sh"
chmod 0644 "$profile_d/torch-to.sh"
echo "environment / 环境: $prefix (for every user / 所有用户可用)"
echo "PATH: $profile_d/torch-to.sh (at each user's next login / 在每个用户下次登录时生效)"
