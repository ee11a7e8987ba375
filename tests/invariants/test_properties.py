"""Property-based tests: the results loader, --set and TOML parsing, the statistics, and the
regression decision, each held to its contract over inputs hypothesis generates.

The loader's and the parser's contract is the one a user meets: a bad file or a bad value is
refused with results.ResultsError or config.ConfigError (one line, exit code 2), never with a
traceback. Each @example pins a bug these tests found (non-UTF-8 bytes, huge integers, deep
nesting, nan/inf settings, an asymmetric threshold), now fixed.

Examples are capped so that the whole file runs in well under 30 s on a 2-core machine.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from benchbench.analysis.config import AnalysisConfig
from benchbench.core import config, results, stats
from benchbench.core.config import ConfigError
from benchbench.core.results import Measurement, ProbeResult, ResultsError, RunResult
from benchbench.engine.catalog import default_registry
from benchbench.probes.dataset import DatasetConfig

FIXTURE = Path(__file__).parents[1] / "support" / "fixtures" / "results_v1_cpu.json"
FIXTURE_DICT = json.loads(FIXTURE.read_text())

# The loader tests write every example to one module-scoped file, and the round trip keeps
# one monkeypatch for all its examples: both on purpose, so that health check is off.
FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
FEW = settings(max_examples=30, deadline=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture])

LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


@pytest.fixture(scope="module")
def results_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("props") / "results.json"


def _load_bytes(path: Path, data: bytes) -> RunResult | None:
    """Write `data` as a results file and load it; None when the loader refused it cleanly."""
    path.write_bytes(data)
    try:
        return results.load(path)
    except ResultsError:
        return None


# --- strategies: JSON and RunResult ------------------------------------------------------------

one_line_text = st.text(alphabet=st.characters(blacklist_characters=LINE_BREAKS,
                                               blacklist_categories=("Cs",)), max_size=12)
json_leaves = (st.none() | st.booleans() | st.integers(-(2**64), 2**64)
               | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12)
json_dicts = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
finite = st.floats(allow_nan=False, allow_infinity=False)

measurements = st.builds(
    Measurement, metric=st.text(max_size=12),
    key=st.dictionaries(st.text(max_size=8), json_leaves, max_size=3), value=finite,
    unit=st.sampled_from(sorted(results.UNITS)),
    statistic=st.sampled_from(sorted(results.STATISTICS)),
    samples=st.lists(finite, max_size=6), higher_is_better=st.booleans(), context=json_dicts)
probe_results = st.builds(
    ProbeResult, name=st.text(max_size=12), status=st.sampled_from(sorted(results.STATUSES)),
    resource=st.sampled_from(sorted(results.RESOURCES)), reason=st.none() | st.text(max_size=20),
    params=json_dicts, started_at=st.none() | st.text(max_size=12),
    duration_s=st.none() | finite, measurements=st.lists(measurements, max_size=3))
run_results = st.builds(
    RunResult, tool=st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
    started_at=st.text(max_size=12), environment=json_dicts, config=json_dicts,
    argv=st.lists(st.text(max_size=12), max_size=4), label=st.none() | st.text(max_size=12),
    finished_at=st.none() | st.text(max_size=12), probes=st.lists(probe_results, max_size=3),
    verdict=st.none() | json_dicts,
    # only the reserved optional keys survive a save, by design (see test_results.py)
    extra=st.dictionaries(st.sampled_from(results.OPTIONAL_KEYS), json_values, max_size=3))

# Random JSON that often looks like a results file: the real keys, and schema_version 1.
REAL_KEYS = sorted({*FIXTURE_DICT, *FIXTURE_DICT["probes"][0],
                    *FIXTURE_DICT["probes"][0]["measurements"][0]})
resultish = st.recursive(
    json_leaves | st.just(1) | st.sampled_from(sorted(results.UNITS | results.STATUSES)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(REAL_KEYS) | st.text(max_size=8), inner, max_size=6),
    max_leaves=20)


def _nodes(obj: Any, path: tuple = ()) -> list[tuple]:
    """Every path below the root: dict keys and list indices."""
    out = []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(
        obj, list) else ()
    for k, v in items:
        out.append((*path, k))
        out += _nodes(v, (*path, k))
    return out


def _get(obj: Any, path: tuple) -> Any:
    for k in path:
        obj = obj[k]
    return obj


BAD_VALUES = (json_values | st.sampled_from(
    [math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, -1, 0, True, "", [], {}, None,
     "NaN", 2**63, -(2**63)]))


@st.composite
def mutated_results(draw: st.DrawFn) -> str:
    """A valid results dict with 1-4 mutations (dropped keys, wrong types, odd numbers, unknown
    keys, a non-dict top level), serialized, and perhaps truncated."""
    data = json.loads(json.dumps(draw(st.just(FIXTURE_DICT) | run_results.map(
        lambda r: json.loads(json.dumps(r.to_dict(), default=str))))))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["drop", "replace", "add", "top"]))
        dicts = [()] + [p for p in _nodes(data) if isinstance(_get(data, p), dict)]
        if op == "top" or not isinstance(data, dict):
            data = draw(st.sampled_from([[], "results", 1, None, [data]]) | json_values)
            continue
        where = _get(data, draw(st.sampled_from(dicts)))
        if op == "drop" and where:
            del where[draw(st.sampled_from(sorted(where)))]
        elif op == "add":
            where[draw(one_line_text)] = draw(BAD_VALUES)
        elif op == "replace" and _nodes(data):
            *parent, last = draw(st.sampled_from(_nodes(data)))
            _get(data, tuple(parent))[last] = draw(BAD_VALUES)
    text = json.dumps(data)
    if draw(st.booleans()):
        text = text[:draw(st.integers(0, len(text)))]
    return text


# --- the results loader ------------------------------------------------------------------------

@pytest.fixture
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    # save() fsyncs each file: right for a run, 50 ms an example here, and not what is tested
    monkeypatch.setattr(os, "fsync", lambda fd: None)


@FEW
@given(run=run_results)
def test_save_then_load_gives_the_same_run(run, results_path, no_fsync):
    results.save(run, results_path)
    back = results.load(results_path)
    assert back == run
    assert back.to_dict() == run.to_dict()


@FAST
@given(value=json_values | resultish)
def test_random_json_is_loaded_or_refused_with_results_error(value, results_path):
    _load_bytes(results_path, json.dumps(value).encode())


@FAST
@given(text=mutated_results())
def test_mutated_results_are_loaded_or_refused_with_results_error(text, results_path):
    _load_bytes(results_path, text.encode())


@FEW
@example(data=b"\xff\xfe{}")
@given(data=st.binary(max_size=64) | mutated_results().map(
    lambda t: t.encode()[:-1] + b"\xc3"))
def test_any_bytes_are_loaded_or_refused_with_results_error(data, results_path):
    _load_bytes(results_path, data)


HUGE = '"__huge__"'


def _with_raw(path: tuple, raw: str) -> str:
    """The recorded run as JSON text with the value at `path` replaced by `raw` JSON text."""
    data = json.loads(json.dumps(FIXTURE_DICT))
    *parent, last = path
    _get(data, tuple(parent))[last] = HUGE[1:-1]
    return json.dumps(data).replace(HUGE, raw, 1)


@st.composite
def huge_numbers(draw: st.DrawFn) -> str:
    """The recorded run with one number replaced by an integer of 309 to 6000 digits: beyond a
    float, and beyond Python's 4300-digit int parsing limit."""
    numeric = [p for p in _nodes(FIXTURE_DICT) if type(_get(FIXTURE_DICT, p)) in (int, float)]
    digits = "9" * draw(st.integers(309, 6000))
    return _with_raw(draw(st.sampled_from(numeric)), draw(st.sampled_from(["", "-"])) + digits)


@FEW
@example(text=_with_raw(("probes", 0, "measurements", 0, "value"), "1" + "0" * 400))
@example(text="9" * 5000)
@given(text=huge_numbers())
def test_numbers_of_any_size_are_refused_with_results_error(text, results_path):
    _load_bytes(results_path, text.encode())


@pytest.mark.parametrize("text", ["[" * 100_000, '{"a":' * 100_000], ids=["array", "object"])
def test_deeply_nested_json_is_refused_with_results_error(text, results_path):
    _load_bytes(results_path, text.encode())


def _broken(draw: st.DrawFn) -> str:
    return draw(one_line_text) + draw(st.sampled_from(LINE_BREAKS)) + draw(one_line_text)


def _small_run(probe: dict[str, Any] | None = None, **measurement: Any) -> dict[str, Any]:
    """A valid results dict with one probe and one measurement, short enough to read in a
    failure report."""
    m = {"metric": "flops", "key": {}, "value": 1.0, "unit": "FLOP/s", "statistic": "median",
         "samples": [1.0], "higher_is_better": True, **measurement}
    return {"schema_version": 1, "tool": {}, "started_at": "t", "environment": {}, "config": {},
            "argv": [], "probes": [{"name": "matmul", "status": "ok", "resource": "cpu_compute",
                                    "measurements": [m], **(probe or {})}]}


@st.composite
def line_broken_results(draw: st.DrawFn) -> str:
    """A run made invalid through a string holding a line break: an unknown key in a probe or
    a measurement, or a metric name beside a value that is not finite."""
    data = _small_run()
    probe = data["probes"][0]
    m = probe["measurements"][0]
    site = draw(st.sampled_from(["probe key", "measurement key", "metric"]))
    if site == "probe key":
        probe[_broken(draw)] = 1
    elif site == "measurement key":
        m[_broken(draw)] = 1
    else:
        m["metric"], m["value"] = _broken(draw), math.nan
    return json.dumps(data)


@FEW
@example(text=json.dumps(_small_run({"bad\nkey": 1})))
@example(text=json.dumps(_small_run(metric="flops\nnext line", value=math.nan)))
@given(text=line_broken_results())
def test_refusals_are_one_line(text, results_path):
    results_path.write_text(text)
    with pytest.raises(ResultsError) as info:
        results.load(results_path)
    assert len(str(info.value).splitlines()) == 1, str(info.value)


# --- --set and TOML parsing --------------------------------------------------------------------

PROBE_CLASSES: dict[str, type] = {**default_registry().config_classes(),
                                  "dataset": DatasetConfig, "analysis": AnalysisConfig}
FIELDS = [(probe, f) for probe, cls in PROBE_CLASSES.items() for f in dataclasses.fields(cls)]
UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def _field_type(probe: str, name: str) -> Any:
    return config._unwrap_optional(typing.get_type_hints(PROBE_CLASSES[probe])[name])


TUPLE_FIELDS = [(p, f) for p, f in FIELDS if typing.get_origin(_field_type(p, f.name)) is tuple]
FLOAT_FIELDS = [(p, f.name) for p, f in FIELDS if _field_type(p, f.name) is float]
SIZE_FIELDS = [(p, f.name) for p, f in FIELDS if f.metadata.get("size")]


def _overrides(sets: list[str], toml: dict[str, Any] | None = None) -> None:
    """collect_overrides as the CLI calls it; ConfigError is the one refusal allowed."""
    try:
        config.collect_overrides(PROBE_CLASSES, toml or {}, sets)
    except ConfigError as exc:
        assert str(exc)


def test_the_field_lists_are_not_empty():
    # the strategies below draw from these; an empty list would make them test nothing
    assert TUPLE_FIELDS and FLOAT_FIELDS and SIZE_FIELDS


values_text = (st.text(max_size=20) | st.from_regex(r"-?\d{1,25}(\.\d*)?([eE][+-]?\d+)?",
                                                    fullmatch=True)
               | st.from_regex(r" ?\d{1,20} ?[kKmMgGtTxX]?(i?[bB])? ?", fullmatch=True)
               | st.sampled_from(["auto", "none", "true", "off", "nan", "-inf", "1e999", ",",
                                  "1,2,,3", "fp32,bf16", "seq1m, rand4k"]))
# Mostly a real probe and one of its own fields, so that the value reaches a converter and
# validate(); sometimes a field of another probe, or anything at all.
field_names = st.sampled_from(sorted({f.name for _, f in FIELDS}))
probe_fields = st.sampled_from([(p, f.name) for p, f in FIELDS]) | st.tuples(
    st.sampled_from(sorted(PROBE_CLASSES)) | st.text(max_size=6),
    field_names | st.text(max_size=6))
set_items = st.builds(lambda pf, v: f"{pf[0]}.{pf[1]}={v}", probe_fields, values_text) | st.text(
    max_size=40)


@settings(max_examples=200, deadline=None)
@given(sets=st.lists(set_items, min_size=1, max_size=2))
def test_set_items_parse_or_raise_config_error(sets):
    _overrides(sets)


toml_values = st.recursive(
    st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=8)


@st.composite
def toml_tables(draw: st.DrawFn) -> dict[str, Any]:
    """A parsed config file: [probe] tables of field = value, now and then a table that is
    not one."""
    out: dict[str, Any] = {}
    for (probe, name), value in draw(st.lists(st.tuples(probe_fields, toml_values),
                                              min_size=1, max_size=2)):
        out.setdefault(probe, {})[name] = value
    if draw(st.integers(0, 9)) == 0:
        out[draw(st.sampled_from(sorted(PROBE_CLASSES)))] = draw(toml_values)
    return out


@settings(max_examples=200, deadline=None)
@given(toml=toml_tables())
def test_toml_tables_parse_or_raise_config_error(toml):
    _overrides([], toml)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 10**15), unit=st.sampled_from(sorted(UNITS)),
       lower=st.booleans(), suffix=st.sampled_from(["", "B", "iB"]),
       pad=st.sampled_from(["", " "]))
def test_sizes_with_iec_suffixes_round_trip(n, unit, lower, suffix, pad):
    if not unit and suffix == "iB":
        suffix = "B"  # "1iB" is not a size
    text = f"{pad}{n}{pad}{unit.lower() if lower else unit}{suffix}{pad}"
    assert config.parse_size(text) == n * UNITS[unit]
    assert config.parse_size(n * UNITS[unit]) == n * UNITS[unit]  # a TOML integer


@settings(max_examples=100, deadline=None)
@given(text=st.from_regex(r" ?-\d+[KMGT]? ?| ?\d+\.\d+[KMGT]? ?| ?\d+ ?[ACDEFHIJLNPXZ] ?",
                          fullmatch=True))
def test_negative_fractional_or_unknown_unit_sizes_are_refused(text):
    with pytest.raises(ConfigError):
        config.parse_size(text)


@st.composite
def comma_lists(draw: st.DrawFn) -> tuple[str, str, str, tuple]:
    """(probe, field, the --set text, the tuple it must parse to) for a tuple-typed field."""
    probe, f = draw(st.sampled_from(TUPLE_FIELDS))
    (item_tp, *_rest) = typing.get_args(_field_type(probe, f.name))
    if f.metadata.get("size"):
        items = draw(st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(sorted(UNITS))),
                              min_size=1, max_size=5))
        texts, expected = [f"{n}{u}" for n, u in items], [n * UNITS[u] for n, u in items]
    elif item_tp is int:
        expected = draw(st.lists(st.integers(-(10**12), 10**12), min_size=1, max_size=5))
        texts = [str(n) for n in expected]
    else:
        texts = draw(st.lists(st.text(alphabet=st.characters(
            blacklist_characters=",", blacklist_categories=("Cs",)), min_size=1, max_size=10)
            .filter(lambda s: s.strip()), min_size=1, max_size=5))
        expected = [s.strip() for s in texts]
    sep = draw(st.sampled_from([",", ", ", " , ", ",\t"]))
    return probe, f.name, sep.join(texts), tuple(expected)


@settings(max_examples=200, deadline=None)
@given(case=comma_lists())
def test_comma_lists_parse_to_tuples_of_the_field_type(case):
    probe, name, text, expected = case
    assume(text.strip().lower() not in ("auto", "none"))  # those mean "the probe decides"
    got = config.convert_field(PROBE_CLASSES[probe], name, text, probe)
    assert got == expected
    assert type(got) is tuple and all(type(g) is type(e) for g, e in zip(got, expected,
                                                                        strict=True))
    # the TOML spelling, a list, gives the same tuple
    assert config.convert_field(PROBE_CLASSES[probe], name, list(expected), probe) == expected


@FEW
@example(case=("size", 5000))
@example(case=("float", 400))
@example(case=("toml file", 5000))
@given(case=st.one_of(st.tuples(st.sampled_from(["size", "toml file"]), st.integers(4301, 6000)),
                      st.tuples(st.just("float"), st.integers(309, 4299))))
def test_numbers_too_large_are_refused_with_config_error(case, results_path):
    kind, digits = case
    with pytest.raises(ConfigError):
        if kind == "size":  # a --set value
            probe, name = SIZE_FIELDS[digits % len(SIZE_FIELDS)]
            config.collect_overrides(PROBE_CLASSES, {}, [f"{probe}.{name}={'9' * digits}M"])
        elif kind == "float":  # a TOML integer (tomllib reads up to 4300 digits)
            probe, name = FLOAT_FIELDS[digits % len(FLOAT_FIELDS)]
            config.collect_overrides(PROBE_CLASSES, {probe: {name: 10**digits}}, [])
        else:
            toml = results_path.with_name("config.toml")
            toml.write_text(f"[storage]\nsize = {'9' * digits}\n")
            config.read_toml(str(toml))


@FEW
@example(case=(("storage", "runtime"), "inf"))
@given(case=st.tuples(st.sampled_from(FLOAT_FIELDS),
                      st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e999"])))
def test_float_fields_refuse_values_that_are_not_finite(case):
    (probe, name), text = case
    with pytest.raises(ConfigError):
        config.collect_overrides(PROBE_CLASSES, {}, [f"{probe}.{name}={text}"])


# --- statistics --------------------------------------------------------------------------------

# Magnitudes up to 1e150: sums of two values near 1.8e308 overflow to inf inside
# statistics.median and fsum, and no measured rate, size or time comes near that.
sample_values = st.floats(min_value=-1e150, max_value=1e150, allow_nan=False)
sample_lists = st.lists(sample_values, min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(samples=sample_lists)
def test_median_lies_within_the_samples(samples):
    assert min(samples) <= stats.median(samples) <= max(samples)


@settings(max_examples=300, deadline=None)
@given(samples=sample_lists)
def test_summary_orders_its_quartiles_and_spread_is_not_negative(samples):
    s = stats.summarize(samples)
    assert s.minimum <= s.q1 <= s.median <= s.q3 <= s.maximum
    assert s.cv >= 0 and s.stdev >= 0 and s.iqr >= 0 and s.n == len(samples)
    assert stats.cv(samples) >= 0


@settings(max_examples=150, deadline=None)
@given(samples=sample_lists, confidence=st.floats(0.5, 0.999))
def test_median_confidence_interval_contains_the_median(samples, confidence):
    lo, hi = stats.median_ci(samples, confidence)
    assert lo <= stats.median(samples) <= hi
    assert lo in samples and hi in samples  # order statistics, not interpolations


@settings(max_examples=150, deadline=None)
@given(samples=st.lists(sample_values, min_size=1, max_size=40, unique=True),
       confidence=st.floats(0.5, 0.999))
def test_median_confidence_interval_reaches_its_confidence(samples, confidence):
    """[x_(k), x_(n-k+1)] covers the median with probability 1 - 2 P(B(n, 1/2) < k): at
    least the confidence asked for, or the whole range when n is too small for it."""
    from scipy.stats import binom

    lo, hi = stats.median_ci(samples, confidence)
    k = 1 + sum(v < lo for v in samples)
    assert sum(v > hi for v in samples) == k - 1  # symmetric order statistics
    assert k == 1 or 2 * binom.cdf(k - 1, len(samples), 0.5) <= 1 - confidence + 1e-12


# --- the regression decision: swapping the sides swaps the outcome ----------------------------

# benchbench/analysis/regression.py is being written alongside these tests: each test imports it, so
# that the rest of this file runs without it.
def _regression() -> Any:
    return pytest.importorskip("benchbench.analysis.regression")


def _swapped(outcome: str) -> str:
    r = _regression()
    return {r.REGRESSED: r.IMPROVED, r.IMPROVED: r.REGRESSED}.get(outcome, outcome)


@st.composite
def sample_pairs(draw: st.DrawFn) -> tuple[list[float], list[float]]:
    """Baseline samples around some value and candidate samples around 0.8 to 1.25 times it,
    each with up to 4% noise: most pairs are decided, some fall near the threshold."""
    center = draw(st.floats(1e-3, 1e12))
    factor = draw(st.floats(0.8, 1.25))
    noise = st.floats(-0.04, 0.04)
    n, m = draw(st.integers(2, 12)), draw(st.integers(2, 12))
    base = [center * (1 + draw(noise)) for _ in range(n)]
    cand = [center * factor * (1 + draw(noise)) for _ in range(m)]
    return base, cand


def _decide(base: list[float], cand: list[float], hib: bool, t: float, a: float) -> Any:
    return _regression().decide(base, cand, hib, threshold_pct=t, alpha=a)


decision_args = dict(pair=sample_pairs(), hib=st.booleans(), threshold=st.floats(0.0, 20.0),
                     alpha=st.sampled_from([0.001, 0.01, 0.05, 0.2]))


@settings(max_examples=120, deadline=None)
@given(**decision_args)
def test_swapping_sides_never_keeps_a_direction(pair, hib, threshold, alpha):
    """The t-test on the sides' values, the noise it implies and the "every value beyond"
    rule do not care which side is the baseline, and a decided change never points the same
    way swapped."""
    regression = _regression()
    base, cand = pair
    ab, ba = _decide(base, cand, hib, threshold, alpha), _decide(cand, base, hib, threshold,
                                                                 alpha)
    assert (ab.test, ab.p_value) == (ba.test, ba.p_value)
    undecided = {regression.NO_CHANGE, regression.INCONCLUSIVE, regression.NOT_TESTED}
    assert (ab.outcome in undecided) == (ba.outcome in undecided)
    if ab.outcome in undecided:
        assert ab.outcome == ba.outcome
    if ab.outcome in (regression.REGRESSED, regression.IMPROVED):
        assert ba.outcome in (_swapped(ab.outcome), regression.WITHIN)
    if ab.change_pct is not None and ba.change_pct is not None:
        assert math.copysign(1, ab.change_pct) != math.copysign(1, ba.change_pct) or (
            ab.change_pct == ba.change_pct == 0)


@settings(max_examples=120, deadline=None)
@example(pair=([100.0, 100.1, 99.9, 100.05, 99.95, 100.02],
               [105.1, 105.2, 105.0, 105.15, 105.05, 105.12]),
         hib=True, threshold=5.0, alpha=0.01)
@example(pair=([100.0, 100.1, 99.9, 100.05, 99.95, 100.02],
               [105.1, 105.2, 105.0, 105.15, 105.05, 105.12]),
         hib=False, threshold=5.0, alpha=0.01)
@given(**decision_args)
def test_swapping_sides_swaps_regressed_and_improved(pair, hib, threshold, alpha):
    base, cand = pair
    ab, ba = _decide(base, cand, hib, threshold, alpha), _decide(cand, base, hib, threshold,
                                                                 alpha)
    assert ba.outcome == _swapped(ab.outcome), (ab, ba)


@settings(max_examples=80, deadline=None)
@given(base=st.floats(1e-3, 1e12), factor=st.floats(0.01, 100.0), hib=st.booleans(),
       threshold=st.floats(0.0, 20.0))
def test_one_value_a_side_is_never_called(base, factor, hib, threshold):
    """Without a second value on either side the noise is unknown: whatever the change, it is
    inconclusive (or, for equal values, no change), never a regression."""
    regression = _regression()
    d = regression.decide([base], [base * factor], hib, threshold_pct=threshold)
    assert d.outcome in (regression.INCONCLUSIVE, regression.NO_CHANGE)
    assert d.noise_pct is None
