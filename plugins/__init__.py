"""Optional extensions found by name, such as context engines under `plugins/context_engine/`."""
