"""The DVC pipeline as code: the only layer that runs stages.

- :mod:`relgrade.pipeline.registry`: every stage declared once (params keys, inputs and
  outputs as ``paths`` keys, the modes it belongs to); renders each experiment's
  ``dvc.yaml`` and checks the committed one against its rendering.
- :mod:`relgrade.pipeline.stages`: one module per stage, ``run(experiment)``;
  :mod:`~relgrade.pipeline.runner` runs each for its entry script, after checking that the
  ``dvc.yaml`` DVC runs has the shape the params give.
- :mod:`relgrade.pipeline.arms`: ``relgrade arm add|remove`` (params, pipeline, price).
- :mod:`relgrade.pipeline.judgments`: what a round owes and holds, from the judgment bank;
  :mod:`~relgrade.pipeline.sharing` (grades reused from other experiments) and
  :mod:`~relgrade.pipeline.panel` (rater queues) beside it.
- :mod:`relgrade.pipeline.status`, :mod:`~relgrade.pipeline.cost`,
  :mod:`~relgrade.pipeline.design`, :mod:`~relgrade.pipeline.decisions`: where an
  experiment stands, what its judging costs, its design record and its decision files.
- :mod:`relgrade.pipeline.scaffold`: a new experiment's folder (``relgrade init``).
"""
