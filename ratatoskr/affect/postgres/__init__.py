"""The affect plane on PostgreSQL: ``open_pg_affect_store(url, ...)``."""
