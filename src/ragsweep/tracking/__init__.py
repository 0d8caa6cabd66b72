"""Everything that talks to MLflow: the store, logging a run, the background logger, stored artifacts."""
