"""The project's own experiments, run from a checkout (``python benchmarks/NAME.py --help``):
not part of the installed package, and nothing in ``src/rapidrl`` imports them. README.md says
what each measures and where its records are."""
