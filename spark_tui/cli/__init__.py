"""The headless command line: one module per command. Never imports Textual."""
