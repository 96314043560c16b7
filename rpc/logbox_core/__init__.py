"""logbox_core: what the RPC API and the web UI share, without Flask.

- searchd: the one client of logbox-searchd (indexer/PROTOCOL.md);
- accounts: users, roles, tokens, login lockout and the audit log in LMDB;
- status: services, disk and RAID state for /api/v1/status.
"""
