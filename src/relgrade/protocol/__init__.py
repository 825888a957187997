"""relgrade.protocol."""
