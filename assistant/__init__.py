"""Everything that thinks: retrieval, consolidation, planning, answering, benchmarks."""
