"""Experiment tooling: run a scenario matrix with one command and turn its folder into tables and figures.

* :mod:`~lightyear.experiments.sweep_spec` reads a sweep description (YAML or JSON) and expands it
  into named runs.
* :mod:`~lightyear.experiments.sweep` (``lightyear-sweep``) writes and runs them with the FLARE
  simulator, resumably; :mod:`~lightyear.experiments.runner` runs one,
  :mod:`~lightyear.experiments.run_status` records outcomes, :mod:`~lightyear.experiments.progress`
  shows progress and :mod:`~lightyear.experiments.slurm` writes a SLURM job-array script.
* :mod:`~lightyear.experiments.report` (``lightyear-report``) reads a sweep folder
  (:mod:`~lightyear.experiments.results`) and writes tables (:mod:`~lightyear.experiments.tables`),
  figures (:mod:`~lightyear.experiments.figures`), and per-run peer-selection heatmaps and selection
  quality (:mod:`~lightyear.experiments.selection`, :mod:`~lightyear.experiments.selection_plots`).

A sweep folder holds ``runs/<run>/job`` (the generated FLARE job), ``runs/<run>/ws`` (the simulator
workspace), ``runs/<run>/log.txt`` (FLARE's output) and ``runs/<run>/status.json``, with
``sweep.json`` (the expanded description) and ``sweep_status.json`` (every run's outcome) on top.
"""
