"""The process: the daemon and the parts it runs, how they are built from settings, and the command line (`cli/`)."""
