"""One module per DVC stage, each ``run(experiment)`` (``run(experiment, arm)`` for the
stages that run once per arm); ``stages/NAME.py`` at the repository's top is its entry point
and :mod:`relgrade.pipeline.registry` declares its inputs, outputs and params."""
