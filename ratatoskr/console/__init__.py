"""The operator console: ``ratatoskr admin ui``, a local web page over the ops API.

It is a thin layer over the functions the ``admin`` commands call (``ratatoskr.ops``): a
tree per plane from explore and narrow, a node's records by cursor, one record opened at a
time (the only place content appears, each open written to the audit log), forget and erase
behind a dry run and a typed confirmation, and health, stats and check per plane.
"""
