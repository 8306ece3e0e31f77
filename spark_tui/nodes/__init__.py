"""spark_tui.nodes (see the package's modules). Never imports Textual."""
