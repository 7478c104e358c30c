"""encoder."""
