"""Local models behind small synchronous classes (LLM, embeddings, speech, vision)."""
