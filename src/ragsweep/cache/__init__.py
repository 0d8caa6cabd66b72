"""The content-addressed stage cache and the embedding store."""
