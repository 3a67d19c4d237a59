"""Applications: fedroc's layers wired together in one process.

:mod:`fedroc.apps.application` imports every layer, so that importing it registers every
site function, method and job; :mod:`fedroc.apps.flower` hands Flower its apps after that.

This package itself imports nothing: Flower's ``flwr run`` checks the app references
(``fedroc.apps.flower:server_app``) with ``importlib.util.find_spec``, which imports the
parent packages, and an eager ``__init__`` here made every ``fedroc flower run`` load
pandas, scipy and every method in the CLI (2-3 s) for nothing.
"""
