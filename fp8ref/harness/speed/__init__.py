"""Throughput, measured as ratios in one run, never asserted."""
