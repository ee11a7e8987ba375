"""A stand-in for the runner's isolator: answers each probe's job at once, with a canned
outcome per probe name (ok() when none is given), and keeps the jobs it was handed."""

from benchbench.engine.isolation import Outcome

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
        if isinstance(answer, Exception):
            raise answer
        return answer


def ok(**extra):
    return Outcome(True, value={"status": "ok", "reason": None, "resource": None,
                                "params": {}, "measurements": [MEAS], **extra})
