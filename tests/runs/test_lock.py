import json
import threading

import pytest

from factrl.runs.lock import LOCK_FILE, RunLockedError, run_lock

from _support import LockHolderProcess


def test_lock_file_names_the_holder_and_is_emptied_on_release(tmp_path):
    with run_lock(tmp_path) as me:
        rec = json.loads((tmp_path / LOCK_FILE).read_text())
        assert rec == {"pid": me.pid, "host": me.host, "started": me.started}
    assert (tmp_path / LOCK_FILE).read_text() == ""


def test_reentrant_in_one_thread_exclusive_across_threads(tmp_path):
    errors = []

    def other():
        try:
            with run_lock(tmp_path):
                pass
        except RunLockedError as exc:
            errors.append(exc)

    with run_lock(tmp_path):
        with run_lock(tmp_path):  # e.g. the CLI, then evaluate() inside it
            pass
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert len(errors) == 1
    with run_lock(tmp_path):  # released after the outer block
        pass


def test_other_process_holds_then_releases(tmp_path):
    holder = LockHolderProcess(tmp_path)
    with pytest.raises(RunLockedError) as info:
        with run_lock(tmp_path):
            pass
    assert info.value.holder is not None and info.value.holder.pid == holder.pid
    holder.release()
    with run_lock(tmp_path):
        pass


def test_old_import_path_is_the_same_lock() -> None:
    import factrl.runlock
    import factrl.runs

    assert factrl.runlock.run_lock is run_lock is factrl.runs.run_lock
    assert factrl.runlock.RunLockedError is RunLockedError
