"""spark_tui.recipes (see the package's modules). Never imports Textual."""
