"""scripts/records.py: a record's data files packed into one archive and back, byte for byte."""

from __future__ import annotations

import importlib.util
import io
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_records():
    spec = importlib.util.spec_from_file_location("records", ROOT / "scripts" / "records.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FILES = {
    "README.md": b"# a record\n",
    "solve.md": b"| seed | minutes |\n",
    "solve.json": b'{"median": 9.7}\n',
    "solve.png": b"\x89PNG not really",
    "spec.yaml": b"algo: dqn\n",
    "seed-1.cmd.json": b'{"command": ["rapidrl"]}\n',
    "seed-1/config.json": b'{"lr": 0.0005}\n',
    "seed-1/summary.json": b'{"frames": 100}\n',
    "seed-1/metrics.csv.gz": b"\x1f\x8b gzipped rows",
    "probe/threads.txt": b"1 thread: 10 ms\n",
}
KEPT = {"README.md", "solve.md", "solve.png", "spec.yaml"}


def write(folder: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)


def tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_pack_keeps_the_readable_files_and_unpack_restores_the_rest(tmp_path, capsys):
    records = load_records()
    rec = tmp_path / "pong_dqn"
    write(rec, FILES)
    assert records.main(["check", str(rec)]) == 1
    assert "seed-1/config.json" in capsys.readouterr().out
    assert records.main(["pack", str(rec)]) == 0
    assert set(tree(rec)) == KEPT | {"data.tar.gz"}
    assert not (rec / "seed-1").exists() and not (rec / "probe").exists()  # empty folders go
    assert records.main(["check", str(rec)]) == 0
    first = (rec / "data.tar.gz").read_bytes()
    # Unpacked: the folder as it was. Packed again: the same archive, to the byte.
    assert records.main(["unpack", str(rec)]) == 0
    assert tree(rec) == FILES
    assert records.main(["pack", str(rec)]) == 0
    assert (rec / "data.tar.gz").read_bytes() == first
    # A new run added later joins the archive; a loose copy replaces its archived one.
    write(rec, {"seed-2/config.json": b'{"lr": 0.001}\n', "seed-1/config.json": b"{}\n"})
    assert records.main(["pack", str(rec)]) == 0
    assert records.main(["unpack", str(rec)]) == 0
    want = dict(FILES, **{"seed-2/config.json": b'{"lr": 0.001}\n', "seed-1/config.json": b"{}\n"})
    assert tree(rec) == want


def test_unpack_refuses_a_member_outside_the_folder(tmp_path):
    records = load_records()
    rec = tmp_path / "rec"
    rec.mkdir()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        info = tarfile.TarInfo("../escape.json")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
    (rec / "data.tar.gz").write_bytes(raw.getvalue())
    with pytest.raises(SystemExit, match="points outside the folder"):
        records.unpack(rec)
    assert not (tmp_path / "escape.json").exists()


def test_the_repository_records_have_no_loose_data_files():
    """docs/results is read on the page; each record's data sits in its data.tar.gz."""
    records = load_records()
    assert records.loose_data(ROOT / "docs" / "results") == []
