"""Tools: the whitelisted registry (schemas, argument validation, time limits) and the built-in
tools."""
