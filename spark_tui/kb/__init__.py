"""The knowledge base of walls: schema, loader, matcher and diagnoses. Never imports Textual."""
