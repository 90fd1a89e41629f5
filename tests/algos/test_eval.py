"""``rapidrl eval``: scores from a run's newest checkpoint, the mp4 video, the loader registry."""

from __future__ import annotations

import dataclasses
import json
import shutil

import cv2
import pytest

from rapidrl import cli
from rapidrl.algos import eval as rl_eval
from rapidrl.algos.dqn.config import PRESETS, DQNConfig
from rapidrl.algos.dqn.train import train
from rapidrl.algos.eval import EvalConfig, evaluate, register_policy_loader
from rapidrl.config import ConfigError
from rapidrl.train import Checkpointer, save_config

SMALL = dict(
    learning_starts=100,
    buffer_size=1_000,
    log_every_seconds=0,
    checkpoint_every_seconds=1e9,
    tensorboard=False,
    no_progress=True,
    torch_threads=1,
)


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("eval") / "cartpole"
    train(DQNConfig(env="CartPole-v1", max_frames=300, run_dir=str(run), **SMALL))
    return run


def frame_count(path) -> int:
    cap = cv2.VideoCapture(str(path))
    n = 0
    while cap.read()[0]:
        n += 1
    cap.release()
    return n


def test_eval_reports_scores(cartpole_run, tmp_path):
    r = evaluate(EvalConfig(str(cartpole_run), episodes=3, json=str(tmp_path / "s.json")))
    assert len(r["scores"]) == 3 and r["frames"] == 300 and r["algo"] == "dqn"
    assert r["mean"] == pytest.approx(sum(r["scores"]) / 3)
    assert r["std"] >= 0 and r["min"] <= r["mean"] <= r["max"]
    assert r["scores"] == [float(n) for n in r["lengths"]]  # CartPole: 1 point per step
    assert json.loads((tmp_path / "s.json").read_text())["scores"] == r["scores"]
    # Greedy play of the same checkpoint with the same seed is reproducible.
    again = evaluate(EvalConfig(str(cartpole_run), episodes=3))
    assert again["scores"] == r["scores"]


def test_eval_pong_plays_full_games_with_rgb_video(tmp_path, monkeypatch):
    import rapidrl.envs

    made = []
    real_make_env = rapidrl.envs.make_env
    monkeypatch.setattr(
        rapidrl.envs, "make_env", lambda env, **kw: made.append(kw) or real_make_env(env, **kw)
    )
    run = tmp_path / "pong"
    cfg = dataclasses.replace(
        PRESETS["fast"], num_envs=1, backend="serial", max_frames=400, run_dir=str(run), **SMALL
    )
    train(cfg)
    video = tmp_path / "v" / "pong.mp4"
    r = evaluate(EvalConfig(str(run), episodes=2, video=str(video), max_steps=60, epsilon=0.01))
    assert r["lengths"] == [60, 60]
    assert made[-1]["episodic_life"] is False and made[-1]["clip_rewards"] is False
    assert made[-1]["render_mode"] == "rgb_array"
    assert frame_count(video) == 61  # video_episodes=1: one frame per step plus the last
    cap = cv2.VideoCapture(str(video))
    ok, frame = cap.read()
    assert ok and frame.shape == (210, 160, 3)
    assert cap.get(cv2.CAP_PROP_FPS) == pytest.approx(15.0)  # 60 Hz / frame skip 4
    cap.release()


def test_sample_is_for_stochastic_policies(cartpole_run):
    with pytest.raises(ConfigError, match="a dqn run acts greedily on its values: drop --sample"):
        evaluate(EvalConfig(str(cartpole_run), episodes=1, sample=True))
    with pytest.raises(ConfigError, match="--sample draws actions from the policy and --epsilon"):
        evaluate(EvalConfig(str(cartpole_run), episodes=1, sample=True, epsilon=0.1))


def test_cli_eval(cartpole_run, capsys):
    assert cli.main(["eval", str(cartpole_run), "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "mean score" in out and "over 2 episodes" in out
    assert cli.main(["eval", str(cartpole_run / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_registry_dispatches_on_the_run_algo(tmp_path, monkeypatch):
    monkeypatch.setattr(rl_eval, "_LOADERS", dict(rl_eval._LOADERS))
    run = tmp_path / "toy"
    save_config(DQNConfig(env="CartPole-v1"), run / "config.json")
    data = json.loads((run / "config.json").read_text())
    data["algo"] = "toy"
    (run / "config.json").write_text(json.dumps(data))
    Checkpointer(run / "checkpoints", algo="toy").save(7, {"anything": 1})
    with pytest.raises(ConfigError, match="no policy loader for algo 'toy'"):
        evaluate(EvalConfig(str(run), episodes=1))
    seen = {}

    def loader(config, ckpt, device):
        seen.update(algo=config["algo"], state=ckpt.state, device=device)
        return (lambda obs: [0] * len(obs)), "CartPole-v1", {}

    register_policy_loader("toy", loader)
    r = evaluate(EvalConfig(str(run), episodes=2))
    assert seen == {"algo": "toy", "state": {"anything": 1}, "device": "cpu"}
    assert r["algo"] == "toy" and r["frames"] == 7 and len(r["scores"]) == 2
    assert all(8 <= s <= 12 for s in r["scores"])  # always pushing left falls in ~10 steps


def test_recurrent_policy_state_is_reset_at_every_episode(tmp_path, monkeypatch):
    """A policy with ``reset()`` (the PPO-LSTM one) starts every eval episode from zero state."""
    monkeypatch.setattr(rl_eval, "_LOADERS", dict(rl_eval._LOADERS))
    run = tmp_path / "toy"
    save_config(DQNConfig(env="CartPole-v1"), run / "config.json")
    data = json.loads((run / "config.json").read_text())
    data["algo"] = "toy"
    (run / "config.json").write_text(json.dumps(data))
    Checkpointer(run / "checkpoints", algo="toy").save(7, {"anything": 1})

    class Policy:
        def __init__(self):
            self.resets, self.calls_since_reset = 0, []

        def reset(self):
            self.resets += 1
            self.calls_since_reset.append(0)

        def __call__(self, obs):
            self.calls_since_reset[-1] += 1  # fails (IndexError) if called before any reset
            return [0] * len(obs)

    policy = Policy()
    register_policy_loader("toy", lambda config, ckpt, device: (policy, "CartPole-v1", {}))
    r = evaluate(EvalConfig(str(run), episodes=3))
    assert policy.resets == 3
    assert policy.calls_since_reset == [int(n) for n in r["lengths"]]


# --------------------------------------------------------------------------------------------
# A run dir that does not fit: clear one-line errors, and eval never changes the run dir
# --------------------------------------------------------------------------------------------
def files_of(directory) -> dict[str, bytes]:
    """Every file under ``directory`` with its bytes: a snapshot to prove nothing changed."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def cli_error(run, capsys) -> str:
    """Run ``rapidrl eval RUN`` expecting the one-line user error (exit 2, no traceback)."""
    capsys.readouterr()
    assert cli.main(["eval", str(run), "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rapidrl: error: ") and "Traceback" not in err
    return err


@pytest.fixture
def run_copy(cartpole_run, tmp_path):
    """A private copy of the trained run, to break in one way per test."""
    copy = tmp_path / "run"
    shutil.copytree(cartpole_run, copy)
    return copy


@pytest.mark.parametrize(
    "text, problem",
    [('{"algo": "dqn", "env": "CartPole', "is not valid JSON"), ("[1, 2]", "holds a JSON list")],
)
def test_eval_broken_config_json_is_a_clear_error(run_copy, capsys, text, problem):
    (run_copy / "config.json").write_text(text)
    before = files_of(run_copy)
    err = cli_error(run_copy, capsys)
    assert str(run_copy / "config.json") in err and problem in err
    assert "delete it" in err  # the fix: eval falls back to the checkpoint's own config
    assert files_of(run_copy) == before


def test_eval_checkpoint_of_another_algorithm(run_copy, capsys):
    ppo = Checkpointer(run_copy / "checkpoints", algo="ppo").save(400, {"net": {}})
    err = cli_error(run_copy, capsys)
    assert str(ppo) in err and "'ppo' run" in err and "'dqn' run" in err
    assert "does not belong to this run" in err


def test_eval_checkpoint_without_the_weights_the_run_needs(run_copy, capsys):
    bare = Checkpointer(run_copy / "checkpoints", algo="dqn").save(400, {"counters": {}})
    err = cli_error(run_copy, capsys)
    assert str(bare) in err and "no state 'q'" in err and "['counters']" in err


def test_eval_changed_network_shape(run_copy, capsys):
    data = json.loads((run_copy / "config.json").read_text())
    data["head_hidden"] = 32  # the network the config now builds is not the trained one
    (run_copy / "config.json").write_text(json.dumps(data))
    err = cli_error(run_copy, capsys)
    assert "ckpt-000000000300.pt" in err and "'q' weights" in err
    assert "missing from the checkpoint" in err or "shapes differ" in err
    assert "head_hidden: checkpoint 0, config.json 32" in err


def test_eval_never_modifies_the_run_dir(run_copy, capsys):
    ckpts = run_copy / "checkpoints"
    good = ckpts / "ckpt-000000000300.pt"
    torn = ckpts / "ckpt-000000000400.pt"
    torn.write_bytes(good.read_bytes()[:100])  # a newer checkpoint, cut short
    (ckpts / "latest").write_text(torn.name + "\n")
    before = files_of(run_copy)
    with pytest.warns(RuntimeWarning) as rec:
        r = evaluate(EvalConfig(str(run_copy), episodes=1))
    assert r["checkpoint"] == good.name and r["frames"] == 300
    msg = str(rec[0].message)
    assert torn.name in msg and "left in place" in msg and "resum" not in msg
    assert files_of(run_copy) == before  # no *.corrupt, ``latest`` unchanged
    # none readable: a clear error, and still nothing changed
    good.write_bytes(b"garbage")
    before = files_of(run_copy)
    err = cli_error(run_copy, capsys)
    assert "none of the 2 checkpoint(s)" in err and "--resume" not in err
    assert files_of(run_copy) == before


def test_eval_episodes_plays_the_final_policy_at_the_end_of_a_run(tmp_path, capsys):
    """--eval-episodes N: the run's final checkpoint played as `rapidrl eval RUN --episodes N`
    plays it, its scores in eval.json and its mean in summary.json; the lock released again."""
    from rapidrl.train.lock import RunLock

    run = tmp_path / "run"
    s = train(
        DQNConfig(env="CartPole-v1", max_frames=300, run_dir=str(run), eval_episodes=3, **SMALL)
    )
    same = evaluate(EvalConfig(str(run), episodes=3))
    assert s["stop_reason"] == "max_frames" and s["eval_episodes"] == 3
    assert (s["eval_mean"], s["eval_std"]) == (same["mean"], same["std"])
    assert json.loads((run / "summary.json").read_text())["eval_mean"] == same["mean"]
    assert json.loads((run / "eval.json").read_text())["scores"] == same["scores"]
    assert "eval: mean score" in capsys.readouterr().err
    RunLock(run).acquire().release()
    # The field does not change what a checkpoint means: a resume may add or change it.
    s = train(
        DQNConfig(env="CartPole-v1", max_frames=400, resume=str(run), eval_episodes=2, **SMALL)
    )
    assert s["frames"] == 400 and s["eval_episodes"] == 2
    assert json.loads((run / "eval.json").read_text())["frames"] == 400
    # A run stopped from outside (an on_log callback: a sweep's pruning; Ctrl-C) is not played.
    stopped = tmp_path / "stopped"
    cfg = DQNConfig(
        env="CartPole-v1", max_frames=10_000, run_dir=str(stopped), eval_episodes=3,
        **{**SMALL, "log_every_frames": 100},
    )  # fmt: skip
    s = train(cfg, on_log=lambda event: True)
    assert s["stop_reason"] == "callback" and "eval_mean" not in s
    assert not (stopped / "eval.json").exists()


def test_eval_episodes_on_the_command_line(tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", "dqn", "--env", "CartPole-v1", "--max-frames", "300", "--run-dir", str(run)]
    argv += ["--learning-starts", "100", "--buffer-size", "1000", "--no-tensorboard"]
    argv += ["--no-progress", "--torch-threads", "1", "--eval-episodes", "2"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    summary = json.loads((run / "summary.json").read_text())
    assert f"final eval {summary['eval_mean']:.2f} (2 episodes)" in out
    assert cli.main([*argv[:-2], "--eval-episodes", "-1"]) == 2
    assert "--eval-episodes must be an int >= 0" in capsys.readouterr().err


def test_a_failed_final_eval_is_a_warning_and_the_run_stays_whole(tmp_path, monkeypatch):
    def broken(cfg, *, quiet=False):
        raise ConfigError("no display")

    monkeypatch.setattr(rl_eval, "evaluate", broken)
    run = tmp_path / "run"
    cfg = DQNConfig(env="CartPole-v1", max_frames=300, run_dir=str(run), eval_episodes=2, **SMALL)
    with pytest.warns(UserWarning, match="the final eval of .* failed .*no display.* is whole"):
        s = train(cfg)
    assert s["stop_reason"] == "max_frames" and "eval_mean" not in s
    assert json.loads((run / "summary.json").read_text())["frames"] == 300
