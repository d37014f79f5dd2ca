"""gharc.github."""
