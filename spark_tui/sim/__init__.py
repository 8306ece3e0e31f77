"""spark_tui.sim (see the package's modules). Never imports Textual."""
