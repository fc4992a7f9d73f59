"""Leaderboard bundles (``edct submit``), their verification and the board (``edct leaderboard``).

``bundle`` packs a run; ``archive`` reads a bundle as hostile input (caps before inflating);
``rederive`` replays the protocol on every record's own evidence (``evidence``); ``verify``
checks a bundle end to end with the board's scoring parameters; ``identity`` names entries by
their verified target; ``board`` and ``html`` rank and render; ``rejudge`` re-runs the board's
own judge and gate; ``eval_results`` writes and reads the Hub's ``.eval_results/*.yaml`` files."""
