import os
import sys
import time
from pathlib import Path

import pytest

from benchbench.engine.isolation import Cancelled, Isolator

sys.path.insert(0, str(Path(__file__).parents[1] / "support"))  # workers import isolation_targets


@pytest.fixture(scope="module")
def iso():
    return Isolator(preload=[])  # no torch: these tests are about process handling


def test_result_and_progress_cross_the_process_boundary(iso):
    seen = []
    out = iso.call("isolation_targets:echo", [1, 2], on_progress=lambda *a: seen.append(a))
    assert out.ok and out.value["got"] == [1, 2]
    assert out.value["pid"] != os.getpid()
    assert seen == [("half", 1, 2)]


def test_exception_gives_one_line_and_traceback(iso):
    out = iso.call("isolation_targets:boom", None)
    assert not out.ok
    assert out.error == "ValueError: bad thing"
    assert "Traceback" in out.detail


def test_segfault_is_contained(iso):
    out = iso.call("isolation_targets:segfault", None)
    assert not out.ok and "SIGSEGV" in out.error


def test_sigkill_names_the_oom_killer(iso):
    out = iso.call("isolation_targets:killed", None)
    assert not out.ok and "SIGKILL" in out.error and "OOM" in out.error


def test_hard_timeout_stops_the_worker(iso):
    t0 = time.monotonic()
    out = iso.call("isolation_targets:sleepy", 30, timeout_s=0.5)
    assert not out.ok and "hard time limit" in out.error
    assert time.monotonic() - t0 < 10


def test_cancel_raises_and_stops(iso):
    t0 = time.monotonic()
    with pytest.raises(Cancelled):
        iso.call("isolation_targets:sleepy", 30, should_stop=lambda: time.monotonic() - t0 > 0.3)
    assert time.monotonic() - t0 < 10


def test_a_worker_stopped_with_its_run_is_interrupted_not_dead(iso):
    """`timeout` signals the whole process group: the worker may die of SIGTERM a moment
    before the parent's handler sets its stop flag. That is an interruption."""
    t_dead = []

    def stop_flag_set_late():  # the parent's handler runs 0.2 s after the worker died
        if not t_dead:
            t_dead.append(time.monotonic())
        return time.monotonic() - t_dead[0] > 0.2

    with pytest.raises(Cancelled):
        iso.call("isolation_targets:terminated", None, should_stop=stop_flag_set_late)
    # Killed by SIGTERM while this process carries on: a dead worker, said so.
    out = iso.call("isolation_targets:terminated", None)
    assert not out.ok and out.error == "the worker process died from SIGTERM"


def test_a_worker_whose_forkserver_died_with_the_run_is_interrupted_not_failed(iso):
    """A signal to the process group kills the forkserver too, and the worker's exit status
    is lost with it (multiprocessing says 255): while the run is being stopped that is an
    interruption, not a probe that failed."""
    t_dead = []

    def stop_flag_set_late():
        if not t_dead:
            t_dead.append(time.monotonic())
        return time.monotonic() - t_dead[0] > 0.2

    with pytest.raises(Cancelled):
        iso.call("isolation_targets:terminated_with_forkserver", None,
                 should_stop=stop_flag_set_late)
    # The next call starts a fresh forkserver; without a signal to this process, it failed.
    out = iso.call("isolation_targets:terminated_with_forkserver", None)
    assert not out.ok and out.error == "the worker process exited with code 255 without a result"
    assert iso.call("isolation_targets:echo", [1]).ok


def test_an_error_sent_while_the_run_is_stopped_is_the_interruption(iso, tmp_path):
    """A probe that turns SIGTERM into an exception (storage removes its scratch file so)
    reports an error; with the run's stop flag set by then, that is the interruption's."""
    mark = tmp_path / "signalled"
    with pytest.raises(Cancelled):
        iso.call("isolation_targets:boom_marked", str(mark), should_stop=mark.exists)
    out = iso.call("isolation_targets:boom_marked", str(tmp_path / "other"))
    assert not out.ok and out.error == "ValueError: stopped by SIGTERM"


def test_nothing_a_worker_started_outlives_its_call(iso):
    """A process a probe started and left running is stopped before the call returns, so
    that it cannot run beside the next probe's measurement."""
    import psutil

    out = iso.call("isolation_targets:leaves_a_process", None)
    assert out.ok
    try:
        left = psutil.Process(out.value)
        assert left.status() == psutil.STATUS_ZOMBIE  # stopped; its reaper has not yet run
    except psutil.NoSuchProcess:
        pass  # stopped and reaped
