"""timing."""
