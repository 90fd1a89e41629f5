"""``--track wandb``: a run's config, metrics rows, summary and learning curve also go to Weights &
Biases, beside TensorBoard and metrics.csv (which stay the record: W&B is a view of them).

Online when wandb finds credentials for its server (``WANDB_API_KEY``, ``wandb login``, the
netrc file ``NETRC`` names, a self-hosted ``WANDB_BASE_URL``), else offline: the run is written
under ``RUN_DIR/wandb/`` and ``wandb sync RUN_DIR/wandb/offline-run-*`` uploads it later.
``WANDB_MODE`` overrides. An online start that fails (no network, the server down) goes on
offline with a warning. The W&B run's name is the run dir's.

The run id is kept in the run dir (``RUN_DIR/wandb_run_id``): a fresh run gets a new one (also in
a reused run dir), ``--resume`` reads it, so a resumed run, also a copied or moved run dir, goes
on in the same W&B run.

Rows go to W&B at their frame count (W&B's step) once a checkpoint covers them: at every
checkpoint and at the end. A run killed (SIGKILL, a full disk) resumes from its newest checkpoint
and logs the rows after it again, as metrics.csv and TensorBoard do (they drop the rows past the
checkpoint); had the killed session sent those rows to W&B already, W&B would hold them twice, or
(its steps only go up) drop the resumed session's. And W&B's own process writes out (offline) or
uploads (online) what it got every few seconds, so a kill loses its last rows, the checkpoint's
among them: a resumed session first sends the rows of metrics.csv that W&B lacks (past the last
step W&B holds: online, the step the server resumes the run at; offline, the newest step in the
run's earlier segments under ``RUN_DIR/wandb/``). So W&B holds exactly metrics.csv's rows, each
once, its steps only going up (online, and offline once ``wandb sync`` uploads the segments in
order); the price is that W&B lags the run by up to one checkpoint interval
(``--checkpoint-every-seconds``). The learning curve goes into the W&B run's summary, so it takes
no step of its own.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import secrets
import string
import struct
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from rapidrl.config import ConfigError, config_to_dict
from rapidrl.train.metrics import read_metrics
from rapidrl.train.run import atomic_write_text

__all__ = [
    "RUN_ID_FILE",
    "WandbTracker",
    "check_tracker",
    "last_logged_step",
    "make_tracker",
    "send_after_end",
    "wandb_run_id",
]

RUN_ID_FILE = "wandb_run_id"
"""The file in a run dir that holds its W&B run id."""

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _import_wandb() -> ModuleType:
    try:
        import wandb
    except ImportError:
        raise ConfigError(
            "--track wandb needs the wandb package: pip install -e '.[wandb]' in the rapidrl checkout (or drop --track)"
        ) from None
    return wandb


def check_tracker(cfg: Any) -> None:
    """The start-up check of ``cfg.track``, made before anything is built or written (a refused
    start leaves nothing): ``ConfigError`` if it names a tracker whose package is missing, or
    W&B credentials it cannot use (asked without a prompt or the network)."""
    if getattr(cfg, "track", "none") == "wandb":
        wandb = _import_wandb()
        if not os.environ.get("WANDB_MODE"):
            _logged_in(wandb)


def _logged_in(wandb: ModuleType) -> bool:
    """Whether wandb has credentials for the server it would use, as ``wandb.init`` finds them
    (``WANDB_API_KEY``, ``WANDB_IDENTITY_TOKEN_FILE``, the netrc file or ``NETRC``, its settings
    files, ``WANDB_BASE_URL`` for a self-hosted server), asked without a prompt and without the
    network; ``ConfigError`` if they are malformed (e.g. a bad ``WANDB_API_KEY``)."""
    try:
        from wandb.errors import AuthenticationError
        from wandb.sdk import wandb_setup
        from wandb.sdk.lib import wbauth
    except ImportError:  # an older wandb (or not the real package)
        wbauth = None
    if wbauth is not None:
        try:
            host = os.environ.get("WANDB_BASE_URL") or wandb_setup.singleton().settings.base_url
            auth = wbauth.authenticate_session(
                host=host, source="rapidrl --track wandb", prompt=False, verify=False,
                update_session=False,
            )  # fmt: skip
        except AuthenticationError as exc:
            raise ConfigError(f"--track wandb: the W&B credentials are unusable: {exc}") from None
        except Exception:  # another wandb's internals: ask its older API below
            pass
        else:
            return auth is not None
    # An older wandb: its api object reads the same sources (not an identity token file).
    try:
        return bool(wandb.api.api_key)
    except Exception:  # no such API: offline, which asks nothing of anyone
        return False


def _new_id() -> str:
    alphabet = string.ascii_lowercase + string.digits  # what wandb's own ids are made of
    return "".join(secrets.choice(alphabet) for _ in range(12))


def wandb_run_id(run_dir: str | os.PathLike, *, resuming: bool) -> str:
    """The W&B run id of ``run_dir``, kept in ``RUN_DIR/wandb_run_id`` (written atomically).

    A fresh run gets a new id, also in a run dir an earlier run used: it is another run. A resumed
    run reads it, wherever the run dir now lies. A run dir without the file (tracked by an older
    rapidrl, whose id was a hash of the run dir's path) gets that hash if it holds a ``wandb/``
    folder, so it goes on in its W&B run when resumed where it was made; else a new id.
    """
    run_dir = Path(run_dir)
    path = run_dir / RUN_ID_FILE
    if resuming:
        try:
            text = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            text = None
        except (OSError, UnicodeDecodeError) as exc:
            warnings.warn(f"could not read {path} ({exc}): a new W&B run id", stacklevel=2)
            text = None
        if text is not None and _ID.fullmatch(text):
            return text
        if text is not None:
            warnings.warn(f"{path} holds no W&B run id ({text[:40]!r}): a new one", stacklevel=2)
        elif (run_dir / "wandb").is_dir():
            legacy = hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:12]
            atomic_write_text(path, legacy + "\n", "the W&B run id")
            return legacy
    run_id = _new_id()
    atomic_write_text(path, run_id + "\n", "the W&B run id")
    return run_id


def _numbers(row: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for k, v in row.items():
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if not math.isnan(f):
            out[k] = f
    return out


_LOG_BLOCK = 32768
"""The block size of W&B's transaction log; each record has a 7-byte header (crc, length, type:
1 whole, 2 first part, 3 middle, 4 last)."""


def last_logged_step(log: str | os.PathLike) -> int | None:
    """The newest history step in a W&B transaction log (``run-ID.wandb``, the file ``wandb sync``
    uploads: W&B's leveldb-style log of protobuf records); None if it holds no row. A record torn
    by a killed writer ends it. ``ValueError`` if it is no such log."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(log).read_bytes()
    if len(data) < 7 or data[:4] != b":W&B":
        raise ValueError(f"{log} is not a W&B transaction log")
    last, pos, record = None, 7, b""
    while True:
        if _LOG_BLOCK - pos % _LOG_BLOCK < 7:  # a block's tail too short for a header: zeros
            pos += _LOG_BLOCK - pos % _LOG_BLOCK
        if pos + 7 > len(data):
            break
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        body = data[pos + 7 : pos + 7 + length]
        if kind == 0 or len(body) < length:  # the end, or the torn tail of a killed writer
            break
        pos += 7 + length
        record = body if kind in (1, 2) else record + body
        if kind not in (1, 4):
            continue
        rec = pb.Record()
        rec.ParseFromString(record)
        if rec.WhichOneof("record_type") == "history":
            step = rec.history.step.num
            last = step if last is None else max(last, step)
    return last


class WandbTracker:
    """One W&B run for one run dir (see the module docstring): :meth:`log` keeps a row,
    :meth:`commit` sends the rows a checkpoint covers, :meth:`finish` sends the rest at the end,
    :meth:`abort` drops them (a failed session: its resume logs them again)."""

    def __init__(
        self,
        cfg: Any,
        run_dir: str | os.PathLike,
        *,
        resume_frames: int | None = None,
        metrics_csv: str | os.PathLike | None = None,
    ):
        """``resume_frames``: the checkpoint a resumed run goes on from (None: a fresh run);
        ``metrics_csv``: its metrics log, as rewound to it (the rows W&B may lack)."""
        wandb = _import_wandb()
        self._wandb = wandb
        run_dir = Path(run_dir)
        resuming = resume_frames is not None
        self.run_id = wandb_run_id(run_dir, resuming=resuming)
        self._pending: list[tuple[int, dict[str, float]]] = []
        # The earlier sessions' W&B logs, before this session's is made.
        earlier = sorted(run_dir.glob(f"wandb/*/run-{self.run_id}.wandb")) if resuming else []
        self.mode = os.environ.get("WANDB_MODE") or ("online" if _logged_in(wandb) else "offline")
        self.run = self._init(cfg, run_dir)
        if resuming and metrics_csv is not None:
            self._catch_up(metrics_csv, self._held(earlier), resume_frames)

    def _init(self, cfg: Any, run_dir: Path) -> Any:
        wandb, mode = self._wandb, self.mode
        init = dict(
            project=cfg.track_project, group=cfg.track_group, name=run_dir.name, id=self.run_id,
            resume="allow", dir=str(run_dir), config=config_to_dict(cfg),
        )  # fmt: skip
        try:
            return wandb.init(mode=mode, **init)
        except Exception as exc:  # whatever the network or the server did
            if mode != "online":
                raise ConfigError(f"--track wandb: W&B did not start ({mode}): {exc}") from exc
            warnings.warn(
                f"W&B did not start online ({type(exc).__name__}: {exc}); this run's W&B run is "
                f"written offline under {run_dir / 'wandb'}: `wandb sync "
                f"{run_dir / 'wandb'}/offline-run-*` uploads it later",
                stacklevel=2,
            )
            self.mode = "offline"
            # The failed start keeps the run id taken in wandb's service process ("run ID is in
            # use"): a new service for the offline start.
            teardown = getattr(wandb, "teardown", None)
            if teardown is not None:
                teardown()
            try:
                return wandb.init(mode="offline", **init)
            except Exception as again:
                raise ConfigError(
                    f"--track wandb: W&B did not start, online ({exc}) nor offline ({again}); "
                    "drop --track, or set WANDB_MODE=disabled"
                ) from again

    def _held(self, earlier: list[Path]) -> float:
        """The last step W&B holds of this run from earlier sessions (-1: none): online, the one
        before the step the server resumed the run at; offline, the newest in those sessions'
        logs (``earlier``). Unknown (a log it cannot read): infinity, nothing is sent again."""
        if self.mode == "online":
            start = getattr(self.run, "starting_step", 0)
            return float(start - 1) if isinstance(start, int) and start > 0 else -1.0
        held = -1.0
        for log in earlier:
            try:
                step = last_logged_step(log)
            except Exception as exc:  # a newer wandb's format, a damaged file
                warnings.warn(
                    f"could not read W&B's log {log} ({exc}): rows W&B lacks of the sessions "
                    "before this one are not sent again",
                    stacklevel=3,
                )
                return math.inf
            if step is not None:
                held = max(held, float(step))
        return held

    def _catch_up(self, metrics_csv: str | os.PathLike, held: float, resume_frames: int) -> None:
        """Send the rows of ``metrics_csv`` (as rewound to the checkpoint at ``resume_frames``)
        past ``held``, the last step W&B holds: those a killed session's W&B process had not
        written out or uploaded yet."""
        # A session of an older rapidrl (rows sent live), or a checkpoint that could not be
        # read: W&B drops the rows of steps it is past.
        if math.isfinite(held) and held > resume_frames:
            warnings.warn(
                f"W&B holds rows of this run up to step {held:.0f}, past the checkpoint this run "
                f"goes on from ({resume_frames} frames): W&B drops the rows logged until then",
                stacklevel=3,
            )
        _, rows = read_metrics(metrics_csv)
        for row in rows:
            try:
                step = int(float(row["frames"]))
            except (KeyError, ValueError):
                continue
            if held < step <= resume_frames:
                self.run.log(
                    _numbers({k: v for k, v in row.items() if k != "frames"}),
                    step=step,
                    commit=True,
                )

    def log(self, frames: int, row: Mapping[str, Any]) -> None:
        """Keep the row at ``frames`` until a checkpoint covers it (:meth:`commit`)."""
        self._pending.append((int(frames), _numbers(row)))

    def commit(self, frames: int) -> None:
        """A checkpoint at ``frames`` was written: send the rows it covers (those at or before
        ``frames``, as metrics.csv keeps them on resume), each at its frame count."""
        run = self.run
        if run is None:
            return
        keep = []
        for step, data in self._pending:
            if step <= frames:
                run.log(data, step=step, commit=True)
            else:
                keep.append((step, data))
        self._pending = keep

    def finish(self, summary: Mapping[str, Any] | None = None, curve: Path | None = None) -> None:
        """The end of a session that ran to its stop (its last checkpoint covers every row): the
        rows not sent yet, the summary's numbers and the learning curve (in the W&B summary: a
        logged image would take a step of its own), then the end of the W&B run (again:
        nothing)."""
        run, self.run = self.run, None
        if run is None:
            return
        for step, data in self._pending:
            run.log(data, step=step, commit=True)
        self._pending = []
        if summary:
            run.summary.update(_numbers(summary))
        if curve is not None and Path(curve).exists():
            run.summary["learning_curve"] = self._wandb.Image(str(curve))
        run.finish()

    def abort(self) -> None:
        """The end of a session that failed: the rows no checkpoint covers are dropped (a resume
        logs them again, as metrics.csv drops and relogs them), the W&B run ends as failed (again:
        nothing)."""
        run, self.run = self.run, None
        self._pending = []
        if run is not None:
            run.finish(exit_code=1)


def send_after_end(cfg: Any, run_dir: str | os.PathLike, values: Mapping[str, Any]) -> None:
    """Numbers a run gets after it ended (its final eval, ``--eval-episodes``) into its W&B
    run's summary: the W&B run opened again by the run dir's id, as a resume opens it (offline:
    one more segment under ``RUN_DIR/wandb/``, which ``wandb sync`` adds to the run), the
    summary updated, the run ended. Nothing without ``--track wandb``."""
    if getattr(cfg, "track", "none") != "wandb":
        return
    # resume_frames: the kept id; no metrics_csv: every row went at the run's own end.
    WandbTracker(cfg, run_dir, resume_frames=0).finish(summary=values)


def make_tracker(
    cfg: Any,
    run_dir: str | os.PathLike,
    *,
    resume_frames: int | None = None,
    metrics_csv: str | os.PathLike | None = None,
) -> WandbTracker | None:
    """The tracker ``cfg.track`` asks for (None: none); the arguments: :class:`WandbTracker`'s. A
    fresh run without one forgets a W&B run id an earlier run left in a reused run dir: a later
    ``--resume --track wandb`` must not go on in that other run's W&B run."""
    if getattr(cfg, "track", "none") == "wandb":
        return WandbTracker(cfg, run_dir, resume_frames=resume_frames, metrics_csv=metrics_csv)
    if resume_frames is None:
        Path(run_dir, RUN_ID_FILE).unlink(missing_ok=True)
    return None
