"""Test collection: the grader scripts under tests/graders/ run as subprocesses, never imported."""

collect_ignore = ["graders/grader.py", "graders/tiny_grader.py", "graders/lenient_grader.py"]
