"""edct-toy: an EDCT-Bench domain (``shapes``) and a paid image editor (``acme-edit``) shipped
outside edct-bench, as docs/extending.md builds them."""
