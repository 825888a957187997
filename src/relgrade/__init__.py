"""relgrade: blind pooled relevance grading and IR evaluation as a DVC pipeline."""

__version__ = "0.1.0"
