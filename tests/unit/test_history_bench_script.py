"""scripts/history_bench.py writes about 80 MB a thousand runs to a temporary folder: it must
remove it when it ends, also on Ctrl-C, and keep it only where --keep names a folder."""

import tempfile

import pytest
from helpers import script


def _script():
    return script("history_bench")


def test_the_runs_it_writes_are_removed_and_kept_only_where_asked(tmp_path, monkeypatch):
    bench = _script()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    bench.scale(8, None)
    assert list(scratch.iterdir()) == []
    kept = tmp_path / "kept"
    bench.scale(8, kept)
    assert len(list((kept / "runs").iterdir())) == 8

    def interrupted(n, root):  # Ctrl-C while it writes
        (root / "runs").mkdir()
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "_scale", interrupted)
    with pytest.raises(KeyboardInterrupt):
        bench.scale(8, None)
    assert list(scratch.iterdir()) == []
