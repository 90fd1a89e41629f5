"""Building the vector env: a layout that does not fit is a clear ConfigError (rc 2, the message
names the fix); anything else raised there is a bug and keeps its own type and traceback."""

from __future__ import annotations

import pytest

import rapidrl.vector
from rapidrl import cli

PRESET = {"ppo": ["--preset", "cartpole"], "dqn": []}  # dqn's default (fast) runs CartPole


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_a_bad_layout_is_a_clear_error(tmp_path, capsys, algo):
    argv = ["--env", "CartPole-v1", "--num-envs", "2", "--backend", "subprocess"]
    argv += ["--num-workers", "1", "--no-progress"]
    argv += ["--max-frames", "64", "--run-dir", str(tmp_path / "r")]
    rc = cli.main(["train", algo, *PRESET[algo], *argv])
    err = capsys.readouterr().err
    assert rc == 2
    assert "cannot build the vector env: subprocess runs one env per process" in err
    assert "Traceback" not in err
    assert not (tmp_path / "r").exists()  # refused before the run dir


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_a_bug_inside_make_vec_is_not_turned_into_a_config_error(tmp_path, monkeypatch, algo):
    def broken(*args, **kwargs):
        raise TypeError("a bug in an env factory")

    monkeypatch.setattr(rapidrl.vector, "make_vec", broken)
    argv = ["--env", "CartPole-v1", "--num-envs", "2", "--no-progress", "--max-frames", "64"]
    with pytest.raises(TypeError, match="a bug in an env factory"):
        cli.main(["train", algo, *PRESET[algo], *argv, "--run-dir", str(tmp_path / "r")])
