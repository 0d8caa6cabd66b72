"""The inputs: corpus, golden set, importers and text preprocessing."""
