"""Tests that start no process and drive no screen: pure functions, real files under `tmp_path`,
in-process watchers. Every test here is marked `fast` (tests/conftest.py), and one that starts a
process fails (`_fast_tests_start_no_process`)."""
