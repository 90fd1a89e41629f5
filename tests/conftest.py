"""Suite-wide settings."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_autotune_cache(tmp_path_factory):
    """Keep backend='auto' hermetic: the machine's real autotune cache (written by
    `rapidrl bench envs --autotune`) must not change which backend a test gets."""
    mp = pytest.MonkeyPatch()
    mp.setenv("RAPIDRL_CACHE_DIR", str(tmp_path_factory.mktemp("rapidrl-cache")))
    yield
    mp.undo()
