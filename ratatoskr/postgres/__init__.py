"""The shared PostgreSQL pieces: URLs, the pool and its transactions, migrations, the jti
ledger, idempotency, health, the scope filter and binary vectors. The planes' PostgreSQL
stores (``ratatoskr.memory.postgres``, ``ratatoskr.affect.postgres``) are built on them."""
