"""The inputs: the corpus, the golden set (model, line parsing, quote resolution, splits),
importers of public data sets, and text preprocessing.

Imports :mod:`ragsweep.cache` and below (docs/architecture.md).
"""
