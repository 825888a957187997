"""The experiment on disk: the only package that knows ``params.yaml`` and the data layout.

- :mod:`relgrade.experiment.params`: the typed params, checked once when read
  (:func:`~relgrade.experiment.params.load_params`).
- :mod:`relgrade.experiment.files`: :class:`~relgrade.experiment.files.Experiment`, where
  every file of an experiment lives and how it is read.
- :mod:`relgrade.experiment.layout`: the experiments of a repository and the paths they claim.
- :mod:`relgrade.experiment.inputs`: a new experiment's input files, checked and converted.
- :mod:`relgrade.experiment.stage`: ``run_stage(main)``, what every stage script shares.
- :mod:`relgrade.experiment.sections`: one top-level section of ``params.yaml`` rewritten
  alone (``relgrade arm add``).
- :mod:`relgrade.experiment.progress`: a long stage's progress lines, one per step.

What runs on an experiment (the stages, what a round owes, status) is
:mod:`relgrade.pipeline`'s.
"""
