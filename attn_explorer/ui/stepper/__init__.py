"""stepper."""
