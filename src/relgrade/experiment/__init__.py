"""The experiment on disk: the only package that knows ``params.yaml`` and the data layout.

- :mod:`relgrade.experiment.params`: the typed params, checked once when read
  (:func:`~relgrade.experiment.params.load_params`).
- :mod:`relgrade.experiment.files`: :class:`~relgrade.experiment.files.Experiment`, where
  every file of an experiment lives and how it is read.
- :mod:`relgrade.experiment.stage`: ``run_stage(main)``, what every stage script shares.
- :mod:`relgrade.experiment.audit`: the audit sample drawn from the experiment's files, locked
  per round, redrawn on request.
- :mod:`relgrade.experiment.status`: where the experiment stands, from whatever files exist.
"""
