"""Recommenders for several backends: the wrapper modules import no torch themselves and
build their models from sibling modules inside ``fit``."""
