"""relgrade.graders."""
