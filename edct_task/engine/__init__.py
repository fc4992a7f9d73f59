"""The EDCT engine: the sans-IO per-sample protocol (``protocol``), the one owner of its generator
(``drive.SampleRun``), the request handlers and the dispatcher, the driver of ``edct run``
(``driver.run_samples`` on the ``pipeline`` or ``lockstep`` schedule) and the stage cache."""
