"""bench profile with make_vec given inline=True and spin for first-ready batches (the CLI
cannot ask for an inline group on the async backend)."""
import sys

import rapidrl.vector as V
import rapidrl.vector.make as M

_orig = M.make_vec


def make_vec(env, num_envs, backend="auto", **kw):
    if kw.get("batch_size") not in (None, num_envs):
        backend = "async"
        kw.update(inline=True, spin=0.002, num_workers=kw.get("num_workers") or 2)
    return _orig(env, num_envs, backend, **kw)


if __name__ == "__main__":
    M.make_vec = V.make_vec = make_vec
    from rapidrl.cli import main

    sys.exit(main(sys.argv[1:]))
