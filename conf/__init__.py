# Makes conf/ the package ragsweep._data.conf in the wheel (pyproject.toml: package-dir):
# Hydra's pkg:// config source only reads a folder that is a Python package.
