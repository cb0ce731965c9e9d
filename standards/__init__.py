"""Standard files (data): ``<op>/<ID>@<N>.toml`` and LOCK. Shipped as numstd.standards."""
