"""That these runs trained today's default: each run's config.json against what `rapidrl train ppo
--preset lean --env pong --seed S [--precision fp32]` gives with this checkout (the bench's own
check, rapidrl.bench.atari.config_changes); an empty list is the same config. The 4-epoch run
of docs/results/pong_ppo_default_d26caae_zen5 is shown as the control."""
from pathlib import Path

from rapidrl.bench.atari import config_changes

here = Path(__file__).parent
for precision, folder in (("bf16", "bf16"), ("fp32", "avx2_fp32")):
    for seed in (1, 2, 3):
        recipe = ["python", "-m", "rapidrl.cli", "train", "ppo", "--preset", "lean", "--env",
                  "pong", "--seed", str(seed)] + (["--precision", "fp32"] if precision == "fp32" else [])
        print(folder, seed, config_changes("ppo", recipe, here / folder / f"seed-{seed}"))
old = here.parent / "pong_ppo_default_d26caae_zen5" / "bf16" / "seed-1"
print("4 epochs (control)", config_changes(
    "ppo", ["python", "-m", "rapidrl.cli", "train", "ppo", "--preset", "lean", "--env", "pong",
            "--seed", "1"], old))
