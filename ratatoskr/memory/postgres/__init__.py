"""The memory plane on PostgreSQL with pgvector: ``open_pg_memory_store(url, ...)``."""
