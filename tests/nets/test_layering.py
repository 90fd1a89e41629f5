"""nets/ sits below algos/: loading a network must not load an algorithm package (which would
also register its envs as a side effect)."""

import subprocess
import sys


def test_networks_load_without_any_algorithm_package():
    code = (
        "import sys; import rapidrl.nets.actor_critic, rapidrl.nets.recurrent, rapidrl.nets.q; "
        "loaded = sorted(m for m in sys.modules if m.startswith('rapidrl.algos')); "
        "print(loaded); sys.exit(1 if loaded else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
