import time

import numpy as np

from rapidrl.vector.make import make_vec


def main():
    for backend, kw in [("auto", {}), ("hybrid", {"num_workers": 2}), ("ale", {})]:
        try:
            v = make_vec("pong", 32, backend, seed=1, env_options={"screen_size": 64}, **kw)
        except Exception as e:
            print(backend, "failed", e)
            continue
        v.reset()
        rng = np.random.default_rng(0)
        for _ in range(20):
            v.step(rng.integers(0, 6, 32))
        t = time.perf_counter()
        n = 0
        while time.perf_counter() - t < 8:
            v.step(rng.integers(0, 6, 32))
            n += 1
        dt = time.perf_counter() - t
        print(
            backend,
            kw,
            f"{n * 32 / dt:.0f} agent steps/s, {dt / (n * 32) * 1024:.3f} s per 1024 steps",
        )
        v.close()


if __name__ == "__main__":
    main()
