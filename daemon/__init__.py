"""The process: settings, lifecycle, wiring, command line, logging."""
