"""Benchmarks: ratios against baselines measured in the same run (never timed tests)."""
