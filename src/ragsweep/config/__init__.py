"""The typed, frozen config dataclasses (what is hashed) and how the Hydra app finds and composes its config."""
