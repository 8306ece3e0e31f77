"""The app's widgets, one class per file."""
