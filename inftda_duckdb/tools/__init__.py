"""User-facing tools: the command line, the SQL shell, the demo and the paper's workloads."""
