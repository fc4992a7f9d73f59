"""The EDCT engine: the sans-IO per-sample protocol, its requests and records, the driver that
owns the generator, the request handlers, the stage cache and the runner behind ``edct run``."""
