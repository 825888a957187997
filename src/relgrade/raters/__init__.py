"""relgrade.raters."""
