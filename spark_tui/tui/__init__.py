"""The Textual front end. The only package that imports Textual."""
