"""Child seeds and generators derived from the experiment seed (relgrade.rng)."""

import hashlib

import numpy as np

from relgrade.rng import comparison_rng, derive_seed, seed_bytes


def test_seed_bytes_are_the_canonical_json_of_tag_seed_and_parts():
    assert seed_bytes(20261130, "order", "w012", "grader", 1) == \
        b'["relgrade-seed-v1",20261130,"order","w012","grader",1]'


def test_child_seed_is_the_first_eight_digest_bytes_with_the_top_bit_cleared():
    digest = hashlib.sha256(b'["relgrade-seed-v1",7,"pool"]').digest()
    assert derive_seed(7, "pool") == int.from_bytes(digest[:8], "big") & (2 ** 63 - 1)


def test_comparison_generators_come_from_the_documented_sha256_string():
    g = comparison_rng(20261130, "compare", "hybrid", "bm25", "R@10")
    same = np.random.default_rng(
        derive_seed(20261130, "stats", "compare", "hybrid", "bm25", "R@10"))
    assert g.integers(0, 2 ** 62) == same.integers(0, 2 ** 62)
    draws = {parts: comparison_rng(1, "compare", *parts).integers(0, 2 ** 62)
             for parts in [("a", "b", "m"), ("b", "a", "m"), ("a", "b", "n"), ("a b", "", "m")]}
    assert len(set(draws.values())) == 4
