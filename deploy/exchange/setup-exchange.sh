#!/bin/sh
# The course's nbgrader exchange on one shared machine (README, "A class on one shared machine").
# Run as root, once (and again for students who join later):
#                       deploy/exchange/setup-exchange.sh INSTRUCTOR [STUDENT ...]
#   INSTRUCTOR             the Unix user who releases, collects and grades (owns the course's folder); their
#                          home becomes private (0700) too: it may hold the checkout, solutions, grades
#   STUDENT                students' Unix users: each home becomes private (0700), so that nobody copies
#                          a classmate's notebook before the deadline
#   COURSE_DIR             the instructor's course folder, made private to the instructor (0700): it holds
#                          gradebook.db, submitted/ and source/ (solutions and hidden tests)
#   EXCHANGE_ROOT          where the exchange lives (default /srv/nbgrader/exchange)
#   JUPYTER_SYSTEM_CONFIG  the folder every user's nbgrader reads (default /etc/jupyter)
set -eu
instructor=${1:?"usage / 用法: $0 INSTRUCTOR [STUDENT ...]"}
shift
exchange=${EXCHANGE_ROOT:-/srv/nbgrader/exchange}
config_dir=${JUPYTER_SYSTEM_CONFIG:-/etc/jupyter}
here=$(dirname "$0")

# nbgrader's documented exchange: every user may create folders in it (release_assignment expects
# mode 777). The sticky bit, as on /tmp, adds one thing: nobody can remove or rename a folder they do
# not own, so no student can move the course's folder aside and put a fake one in its place.
mkdir -p "$exchange"
chmod 1777 "$exchange"
# The course's folder belongs to the instructor from the start, so no student can create it first.
# nbgrader makes the rest: outbound/ (0755), inbound/ (0733: students drop submissions they cannot
# list), feedback/ (0711: each student finds only the file named by a hash of their own submission).
install -d -o "$instructor" -m 0755 "$exchange/torch-to"

install -d -m 0755 "$config_dir"
sed "s|/srv/nbgrader/exchange|$exchange|" "$here/nbgrader_config.py" > "$config_dir/nbgrader_config.py"
chmod 0644 "$config_dir/nbgrader_config.py"
if [ -n "${COURSE_DIR:-}" ]; then
  install -d -o "$instructor" -m 0700 "$COURSE_DIR"
  chown "$instructor" "$COURSE_DIR" && chmod 0700 "$COURSE_DIR"  # also when it was there before
  echo "course folder / 课程目录: $COURSE_DIR (only $instructor / 仅 $instructor 可访问)"
fi
# Private homes: the instructor's (a default 0755 home lets every student read what the instructor keeps
# there) and each student's (nobody copies a classmate's notebook before the deadline).
for user in "$instructor" "$@"; do
  home=$(getent passwd "$user" | cut -d: -f6)
  [ -n "$home" ] || { echo "no such user / 没有这个用户: $user" >&2; exit 1; }
  chmod 0700 "$home"
  echo "private home / 私有主目录: $home ($user)"
done
echo "exchange / 交换目录: $exchange (course / 课程 torch-to, instructor / 教师 $instructor)"
echo "configuration / 配置: $config_dir/nbgrader_config.py"
