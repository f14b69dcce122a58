"""Experiment runners, paper reproductions and reports, built from tidy records."""
