"""EDCT: Explanation-Driven Counterfactual Testing of vision-language models."""

__version__ = "0.2.0"
