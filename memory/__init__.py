"""What is remembered and how it is found: the SQLite store, records, segments, indices, time."""
