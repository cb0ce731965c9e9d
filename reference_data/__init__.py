"""Reference data (Parquet tables, captures, evidence) with manifests. Shipped as numstd.reference_data."""
