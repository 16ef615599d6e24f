"""Sub-commands of the `hermes` command line; `run_agent.py` parses and dispatches to them."""
