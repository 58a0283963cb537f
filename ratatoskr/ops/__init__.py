"""The operator surface as a Python API: what the ``ratatoskr admin`` commands call.

Everything here works directly on the plane files (a server may be running on them), so an
operator can see what a tenant holds, erase a person and keep the files healthy without
going through the wire. Nothing here returns record content except ``listing.get_records``.
"""
