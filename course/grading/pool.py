"""A pool of forked worker processes that survives its workers: `course grade`'s, one submission a task.

A worker that dies (killed, out of memory, a crash in nbgrader) costs only the task it was running:
`run_jobs` sees its process end without an answer, reports that task as not done with the cause, starts
a new worker and finishes the rest. (multiprocessing.Pool would lose the task and wait for ever.)

Not pebble's ProcessPool, which does the same (code review 5efd9e0, F): it forks the workers that replace dead
ones from its manager thread (`pool_manager_loop`), while this process's other threads may hold a gradebook
engine's or logging's locks, and a child forked then keeps such a lock held for ever. Here the main thread forks.
"""
import ctypes
import multiprocessing
import multiprocessing.connection
import signal
import time

from autograder.messages import Bilingual

_PR_SET_PDEATHSIG = 1


def run_jobs(function, tasks, workers, initializer=None, initargs=(), deadline_s=None, overdue=None):
    """Yield (task, (True, function(task))) for every task, as they finish, from `workers` forked
    worker processes; a task whose worker died yields (task, (False, cause)), with the cause as a
    Bilingual, and a new worker takes its place. A task still running `deadline_s` seconds after it
    started yields (task, (False, overdue)): this process, which no submission's code can signal,
    kills its worker (the worker's sandboxes die with it) and the class goes on."""
    context = multiprocessing.get_context("fork")
    pending, idle, busy = list(reversed(tasks)), [], {}  # busy: connection → (process, task)
    started = {}  # connection → when its task was sent
    try:
        while pending or busy:
            while pending and len(busy) < workers:
                process, connection = idle.pop() if idle else _start(context, function, initializer, initargs)
                try:
                    connection.send(pending[-1])
                except OSError:  # it died while idle: another one takes the task
                    process.join(5)
                    connection.close()
                    continue
                busy[connection] = (process, pending.pop())
                started[connection] = time.monotonic()
            for connection in [c for c in busy if deadline_s is not None
                               and time.monotonic() - started[c] >= deadline_s]:
                process, task = busy.pop(connection)
                process.kill()
                process.join(30)
                connection.close()
                yield task, (False, overdue)
            if not busy:
                continue
            sentinels = {process.sentinel: connection for connection, (process, _) in busy.items()}
            first_due = None if deadline_s is None else max(0.0, min(started[c] for c in busy) + deadline_s - time.monotonic())
            for ready in multiprocessing.connection.wait([*busy, *sentinels], first_due):
                connection = sentinels.get(ready, ready)
                if connection not in busy:
                    continue  # its answer and its end were both ready: handled already
                process, task = busy.pop(connection)
                try:
                    result = connection.recv() if connection.poll() else None
                except (EOFError, OSError):
                    result = None
                if result is not None:
                    idle.append((process, connection))
                    yield task, (True, result)
                else:
                    process.join(5)
                    connection.close()
                    yield task, (False, _cause(process.exitcode))
    finally:
        stopping = [process for process, _ in idle]
        for process, connection in idle:
            try:
                connection.send(None)
            except OSError:
                pass
        for process, _ in busy.values():  # only when the caller stopped early (Ctrl-C, an error)
            process.kill()
            stopping.append(process)
        for process in stopping:
            process.join(30)
        for connection in [*(c for _, c in idle), *busy]:
            connection.close()


def _start(context, function, initializer, initargs):
    ours, theirs = context.Pipe()
    process = context.Process(target=_work, args=(theirs, function, initializer, initargs), daemon=True)
    process.start()
    theirs.close()
    return process, ours


def _work(connection, function, initializer, initargs):
    # a worker never outlives `course grade` (its sandboxes then die with it: --die-with-parent)
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if initializer:
        initializer(*initargs)
    while (task := connection.recv()) is not None:
        # `function` answers for its own errors; one it lets through ends this worker, which costs its task
        connection.send(function(task))


def _cause(exitcode) -> Bilingual:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = str(-exitcode)
        return Bilingual(f"killed by {name}", f"被信号 {name} 终止")
    return Bilingual(f"exit status {exitcode}", f"退出状态 {exitcode}")
