"""A stand-in for the runner's isolator: answers each probe's job at once, with a canned
outcome per probe name (ok() when none is given), and keeps the jobs it was handed."""

from benchbench.engine.isolation import Cancelled, Outcome

MEAS = {"metric": "flops", "key": {"device": "cpu", "dtype": "fp32", "size": 64},
        "value": 1e9, "unit": "FLOP/s", "statistic": "median", "samples": [1e9, 1e9, 1e9],
        "higher_is_better": True, "context": {}}


class FakeIsolator:
    def __init__(self, answers):
        self.answers = answers
        self.jobs = []

    def call(self, target, job, **kw):
        self.jobs.append((job, kw))
        answer = self.answers.get(job.name) or ok()
        if isinstance(answer, Signalled):
            answer = answer.arrive()
        if isinstance(answer, Exception):
            raise answer
        return answer


def ok(**extra):
    return Outcome(True, value={"status": "ok", "reason": None, "resource": None,
                                "params": {}, "measurements": [MEAS], **extra})


class Signalled:
    """An answer: `signal` arrives while this probe runs (its round `in_round`; the rounds
    before end ok), setting the run's stop flag as its handler does; the isolator then stops
    the worker (Cancelled), or with `finishes` the probe ends first and its result comes back."""

    def __init__(self, stop, signal="SIGTERM", finishes=False, in_round=1):
        self.stop, self.signal, self.finishes = stop, signal, finishes
        self.in_round, self.calls = in_round, 0

    def arrive(self):
        self.calls += 1
        if self.calls < self.in_round:
            return ok()
        self.stop.signal_name = self.signal
        self.stop.at = "2026-12-06T10:00:00+00:00"
        return ok() if self.finishes else Cancelled()
