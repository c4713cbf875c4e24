"""Experiment tooling: run a scenario matrix with one command (:mod:`~lightyear.experiments.sweep`) and turn its
folder (``sweep.json``, ``sweep_status.json``, ``runs/<run>/``) into tables and figures
(:mod:`~lightyear.experiments.report`); see docs/jobs-and-settings.md, "Experiments".
"""
