"""Pack a result record's data files into one archive beside its README, or unpack them.

A record under docs/results/ is read on the page (its README.md, the suite/solve tables, the
curves) and re-analysed from its data (each run's config.json, summary.json, metrics.csv.gz, the
probes' JSON and text). ``pack`` moves the data files of a record folder into ``data.tar.gz``
there, paths kept, so a folder of hundreds of small files is a handful; ``unpack`` puts them back
(the folder is then the ``rapidrl bench atari`` out dir it was, and ``--report`` or a rerun of
its command takes it as it is). The archive is byte-for-byte the same for the same files (sorted
members, no times or owners), so packing an unchanged record changes nothing in git.

    python scripts/records.py pack docs/results/pong_dqn_lean_zen4    # or several folders
    python scripts/records.py unpack docs/results/pong_dqn_lean_zen4
    python scripts/records.py check docs/results                      # no loose data file left

Kept as files (``KEEP``): Markdown (the READMEs and the ``suite.md`` / ``solve.md`` / ``sweep.md``
tables), PNG curves, YAML specs and a sweep's ``best.json`` (a ``--config`` file).
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import io
import sys
import tarfile
from pathlib import Path

ARCHIVE = "data.tar.gz"
KEEP = ("*.md", "*.png", "*.yaml", "best.json")


def is_kept(name: str) -> bool:
    return name == ARCHIVE or any(fnmatch.fnmatch(name, p) for p in KEEP)


def loose_data(folder: Path) -> list[Path]:
    """The data files under ``folder`` that are not in its archive, sorted."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not is_kept(p.name))


def read_archive(folder: Path) -> dict[str, bytes]:
    path = folder / ARCHIVE
    if not path.exists():
        return {}
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def write_archive(folder: Path, members: dict[str, bytes]) -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(members[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(members[name]))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9, mtime=0, filename="") as gz:
        gz.write(raw.getvalue())
    tmp = folder / (ARCHIVE + ".tmp")
    tmp.write_bytes(out.getvalue())
    tmp.replace(folder / ARCHIVE)


def pack(folder: Path) -> int:
    """Move the loose data files of ``folder`` into its archive (added to what it holds, a loose
    file replacing its archived copy); returns how many files moved."""
    files = loose_data(folder)
    if not files:
        return 0
    members = read_archive(folder)
    for p in files:
        members[p.relative_to(folder).as_posix()] = p.read_bytes()
    write_archive(folder, members)
    for p in files:
        p.unlink()
    for d in sorted((d for d in folder.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)):
        if not any(d.iterdir()):
            d.rmdir()
    return len(files)


def unpack(folder: Path) -> int:
    """Put the archive's files back in ``folder`` and remove the archive; returns how many."""
    members = read_archive(folder)
    for name, data in members.items():
        target = (folder / name).resolve()
        if folder.resolve() not in target.parents:
            raise SystemExit(f"{folder / ARCHIVE}: member {name!r} points outside the folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (folder / ARCHIVE).unlink(missing_ok=True)
    return len(members)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=("pack", "unpack", "check"))
    ap.add_argument("folders", nargs="+", type=Path)
    a = ap.parse_args(argv)
    for folder in a.folders:
        if not folder.is_dir():
            print(f"records: {folder} is not a folder", file=sys.stderr)
            return 2
    if a.action == "check":
        loose = [p for f in a.folders for p in loose_data(f)]
        for p in loose:
            print(f"loose data file (python scripts/records.py pack <its record folder>): {p}")
        return 1 if loose else 0
    for folder in a.folders:
        n = pack(folder) if a.action == "pack" else unpack(folder)
        print(f"{folder}: {n} files {'packed' if a.action == 'pack' else 'unpacked'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
