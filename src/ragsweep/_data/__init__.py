"""The files that ship with ragsweep: the config defaults, the bundled sweep files and the
demo data.

In a wheel this package holds ``conf/``, ``sweeps/`` and ``demo/``; they are the
repository's own top-level folders, mapped here by ``package-dir`` in ``pyproject.toml``
(one copy in git). In an editable install they are read in place from the repository.
:mod:`ragsweep.config.app` is the only module that locates them.
"""
