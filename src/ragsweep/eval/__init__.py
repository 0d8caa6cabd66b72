"""Scoring: relevance of chunks to evidence spans, measures, budgets, intervals and paired statistics."""
