"""The compiled bootstrap gives numpy's resample means bit for bit and leaves the generator
where numpy's draws leave it (so the sign-flip test drawn next from the same generator is
unchanged too)."""

from __future__ import annotations

import numpy as np
import pytest

from relgrade.evaluation import _resample, stats

pytestmark = pytest.mark.skipif(_resample._kernels() is None, reason="numba not installed")


def _meaningful(state: dict) -> tuple:
    # the buffered half counts only while has_uint32 says it is there
    return (state["state"], state["has_uint32"], state["uinteger"] if state["has_uint32"] else None)


def _both(src, weights, gen, seed, n_resamples, block_rows, drawn_before):
    g_numpy = np.random.Generator(gen(seed))
    g_fast = np.random.Generator(gen(seed))
    for g in (g_numpy, g_fast):  # an odd count leaves half an output buffered in the state
        g.integers(0, 2 ** 32, size=drawn_before, dtype=np.uint32)
    want = stats._bootstrap_blocks(src, weights, g_numpy, n_resamples)
    got = _resample.bootstrap_rows(src, weights, g_fast, n_resamples, block_rows)
    return want, got, g_numpy, g_fast


@pytest.mark.parametrize("n", [2, 7, 8, 9, 127, 128, 129, 257, 1001])
@pytest.mark.parametrize("gen", [np.random.PCG64, np.random.PCG64DXSM])
@pytest.mark.parametrize("drawn_before", [0, 1])
@pytest.mark.parametrize("weighted", [False, True])
def test_compiled_resample_means_are_numpys_bytes_and_leave_the_same_generator_state(
        n, gen, drawn_before, weighted):
    r = np.random.default_rng(n)
    values = r.normal(size=(3, n)) * 10.0 ** r.uniform(-3, 3, size=(3, 1))
    weights = r.uniform(0.1, 5.0, size=n) if weighted else None
    src = values if weights is None else values * weights[None, :]
    for arms in (src[:1], src):   # one arm (the fused loop) and several
        want, got, g_numpy, g_fast = _both(arms, weights, gen, 10 * n + drawn_before, 23, 7,
                                           drawn_before)
        assert want.tobytes() == got.tobytes()
        assert _meaningful(g_numpy.bit_generator.state) == _meaningful(g_fast.bit_generator.state)
        assert np.array_equal(g_numpy.integers(0, 2 ** 32, size=5, dtype=np.uint32),
                              g_fast.integers(0, 2 ** 32, size=5, dtype=np.uint32))


def test_rejected_words_shift_the_stream_as_numpys_draws_do():
    # n = 65,899 rejects a word when its low product falls below (2^32 - n) mod n = 65,870,
    # 1.5e-5 of words: about 60 rejections in 60 resamples, many of them at block edges
    n = 65_899
    assert (2 ** 32 - n) % n == 65_870
    src = np.random.default_rng(0).normal(size=(1, n))
    for block_rows in (1, 3):
        want, got, g_numpy, g_fast = _both(src, None, np.random.PCG64, 3, 60, block_rows, 0)
        assert want.tobytes() == got.tobytes()
        assert _meaningful(g_numpy.bit_generator.state) == _meaningful(g_fast.bit_generator.state)


def test_bootstrap_means_takes_numpys_path_for_other_generators():
    x = np.random.default_rng(1).random(50)
    mt = np.random.Generator(np.random.MT19937(4))
    assert not _resample.available(mt, x.size, elements=1 << 30)
    # numpy draws nothing for n = 1
    assert not _resample.available(np.random.default_rng(4), 1, elements=1 << 30)
    want = stats._bootstrap_blocks(x[None, :], None, np.random.Generator(np.random.MT19937(4)),
                                   40)[:, 0]
    assert np.array_equal(stats.bootstrap_means(x, rng=mt, n_resamples=40), want)


@pytest.mark.parametrize("n", [41, 800, 4099])
def test_compiled_sign_flip_counts_equal_numpys(monkeypatch, n):
    r = np.random.default_rng(n)
    # small effects, so that the count of extreme permutations is neither 0 nor all
    d = r.normal(0.02, 1.0, size=n) * 10.0 ** r.uniform(-2, 2, size=n)
    d[::5] = 0.0
    w = r.uniform(0.5, 2.0, size=n)
    monkeypatch.setattr(_resample, "COMPILED_MIN_ELEMENTS", 0)
    compiled = [stats.sign_flip_test(d, rng=np.random.default_rng(1), n_permutations=3001,
                                     weights=ww) for ww in (None, w)]
    monkeypatch.setattr(_resample, "_kernels", lambda: None)
    plain = [stats.sign_flip_test(d, rng=np.random.default_rng(1), n_permutations=3001,
                                  weights=ww) for ww in (None, w)]
    assert compiled == plain
    assert 0 < compiled[0].extreme < 3001


def test_a_small_comparison_stays_on_numpys_path_and_does_not_import_numba():
    import subprocess
    import sys

    code = ("import sys, numpy as np\n"
            "from relgrade.evaluation import stats\n"
            "x = np.random.default_rng(1).random(1000)\n"
            "stats.bootstrap_ci(x, rng=np.random.default_rng(2), n_resamples=2000)\n"
            "stats.sign_flip_test(x - 0.5, rng=np.random.default_rng(3))\n"
            "print('numba' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"   # 2,000 x 1,000 = 2e6 elements, below COMPILED_MIN_ELEMENTS


def test_the_compiled_path_is_taken_from_the_element_threshold_on():
    n = 1000
    small = _resample.COMPILED_MIN_ELEMENTS // n - 1
    g = np.random.default_rng(1)
    assert _resample.available(g, n, elements=(small + 1) * n)
    # below the threshold only when the kernels are not loaded yet (here they are)
    assert _resample.kernels_for(small * n) is not None


def test_a_read_only_install_without_a_numba_cache_folder_leaves_resampling_to_numpy():
    # numba raises RuntimeError at import when it finds no writable cache location (a
    # read-only site-packages and no writable home); simulated by removing its locators
    import subprocess
    import sys

    code = ("from numba.core import caching\n"
            "caching.CacheImpl._locator_classes = []\n"
            "from relgrade.evaluation import _resample\n"
            "print(_resample._kernels())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "None"
