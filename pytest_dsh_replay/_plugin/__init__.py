"""The plugin's policy, pytest-free: the run's state and summary, scenario names."""
