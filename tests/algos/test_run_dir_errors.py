"""Starts and resumes that cannot go on: one clear line (exit 2), and nothing made or changed on
disk -- no empty run dir from a start that fails validation, no config.json rewritten by a resume
that the checkpoint refuses, no traceback for a torn config.json."""

from __future__ import annotations

import json

import pytest

from rapidrl import cli

QUIET = ["--no-progress", "--no-tensorboard", "--torch-threads", "1"]


def files_of(directory) -> dict[str, bytes]:
    """Every file under ``directory`` with its bytes: a snapshot to prove nothing changed."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def cli_error(argv, capsys) -> str:
    """``rapidrl ARGV`` expecting the one-line user error: exit 2, no traceback."""
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("rapidrl: error: ") and "Traceback" not in err
    return err


BAD_LAYOUT = ["--env", "CartPole-v1", "--num-envs", "2", "--num-workers", "5"]


@pytest.mark.parametrize(
    "argv, message",
    [
        # the serial cartpole preset: refused by the config check
        (["train", "ppo", "--preset", "cartpole", *BAD_LAYOUT], "drop --num-workers"),
        # a process backend: refused only when the vector env is built
        (["train", "ppo", "--preset", "cartpole", *BAD_LAYOUT, "--backend", "hybrid"],
         "num_workers must be in [1, num_envs=2], got 5"),
        (["train", "pqn", "--preset", "cartpole", *BAD_LAYOUT, "--backend", "hybrid"],
         "num_workers must be in [1, num_envs=2], got 5"),
        (["train", "dqn", *BAD_LAYOUT, "--backend", "hybrid"],
         "num_workers must be in [1, num_envs=2], got 5"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("named", [False, True], ids=["default-run-dir", "run-dir"])
def test_failed_start_leaves_no_run_dir(tmp_path, monkeypatch, capsys, argv, message, named):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "mine"
    err = cli_error([*argv, *QUIET, *(["--run-dir", str(run)] if named else [])], capsys)
    assert message in err
    assert list(tmp_path.iterdir()) == []  # neither runs/<algo>-... nor mine/


@pytest.mark.parametrize("algo", ["ppo", "dqn", "pqn"])
@pytest.mark.parametrize(
    "text, problem",
    [('{"algo": "ppo", "env": "Cart', "is not valid JSON"), ('"ppo"', "holds a JSON str")],
)
def test_resume_with_a_broken_config_json(tmp_path, capsys, algo, text, problem):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.json").write_text(text)
    before = files_of(run)
    err = cli_error(["train", algo, "--resume", str(run), *QUIET], capsys)
    assert str(run / "config.json") in err and problem in err and "repair it" in err
    assert files_of(run) == before


SMALL = {
    "ppo": ["--preset", "cartpole", "--num-envs", "2", "--num-steps", "32", "--minibatches", "2",
            "--epochs", "1"],
    "pqn": ["--preset", "cartpole", "--num-envs", "2", "--num-steps", "32", "--minibatches", "2",
            "--epochs", "1"],
    "dqn": ["--num-envs", "2", "--backend", "serial", "--learning-starts", "32",
            "--buffer-size", "1000"],
}  # fmt: skip


@pytest.mark.parametrize("algo", ["ppo", "dqn", "pqn"])
def test_resume_refused_by_the_checkpoint_changes_nothing(tmp_path, capsys, algo):
    run = tmp_path / "run"
    argv = ["train", algo, "--env", "CartPole-v1", *SMALL[algo], *QUIET, "--max-frames", "64"]
    assert cli.main([*argv, "--run-dir", str(run)]) == 0
    lr = json.loads((run / "config.json").read_text())["lr"]
    before = files_of(run)
    err = cli_error(["train", algo, "--resume", str(run), "--lr", "0.5"], capsys)
    assert f"lr: checkpoint {lr!r}, now 0.5" in err
    assert files_of(run) == before  # config.json is not rewritten with the refused lr
    # the reordered start still resumes: the run goes on from its checkpoint
    assert cli.main(["train", algo, "--resume", str(run), "--max-frames", "128"]) == 0
    assert json.loads((run / "summary.json").read_text())["frames"] == 128
    assert json.loads((run / "config.json").read_text())["max_frames"] == 128
