"""spark-tui: bring up LLM serving across DGX Spark clusters without hitting the same walls twice."""

__version__ = "0.1.0"
