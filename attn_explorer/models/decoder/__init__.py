"""decoder."""
