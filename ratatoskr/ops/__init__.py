"""The operator surface as a Python API: what the ``ratatoskr admin`` commands call.

Everything here works directly on the planes' storage, SQLite files or a PostgreSQL
database (a server may be serving them), so an operator can see what a tenant holds, erase
a person and keep the storage healthy without going through the wire. Nothing here returns
record content except ``listing.get_records``.
"""
