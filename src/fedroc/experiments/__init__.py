"""The papers' experiments and example data, an application on top of :mod:`fedroc.methods`.

Nothing here is part of a method: these modules reproduce what the papers report, with the
methods' public API, and are what ``fedroc figures --paper N`` and ``fedroc demo`` run.

- :mod:`~fedroc.experiments.rocglm`: paper 1's figures 3-8.
- :mod:`~fedroc.experiments.rocglm_simulation`: paper 1's simulation (section 5).
- :mod:`~fedroc.experiments.gbsg2`: paper 1's use case on the GBSG2 data (section 6).
- :mod:`~fedroc.experiments.sequester`: paper 2's figures 3, 4 and 5.
- :mod:`~fedroc.experiments.clustered`: paper 3's figures 1 and 4.
- :mod:`~fedroc.experiments.histogram`: paper 5's figures 1-4.

Each figure module registers its figures with :func:`fedroc.figures.paper_figure`. The
modules are not imported here: a figure's module is loaded when its paper is asked for.
"""
