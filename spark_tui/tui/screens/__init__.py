"""The app's screens and modals, one class per file."""
