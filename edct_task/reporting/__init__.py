"""``edct report``: the paper's tables and Fig. 5 from lmms-eval results, `edct run` folders and bundles."""
