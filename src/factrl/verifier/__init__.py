"""A fact-checking cross-encoder trained by factrl (``factrl-verifier``)."""
