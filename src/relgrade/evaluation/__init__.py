"""relgrade.evaluation."""
