"""The Spark connector (PySpark Python Data Source API)."""
