"""Foundations every stage uses: errors, hashing, atomic writes, locks, registries, terminal output, vocabularies."""
