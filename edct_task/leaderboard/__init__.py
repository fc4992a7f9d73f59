"""Leaderboard bundles (``edct submit``), their verification by recomputation and the board
(``edct leaderboard``)."""
