"""relgrade.experiment."""
