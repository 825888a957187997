"""relgrade.io.files."""
