"""logbox_client: the Python client of the logbox RPC API (rpc/API.md) for scripts.

It depends on `requests` only (the `logbox-remote` CLI also uses `tqdm` for its progress bar)
and on nothing else of logbox::

    from logbox_client import Client, LogboxError

    c = Client("https://127.0.0.1:8444", verify="var/tls/https.crt")
    c.login("admin", password)
    for hit in c.iter_search("program:sshd failed", from_="-1d"):
        print(hit["id"], hit["message"])
"""

from .client import Client, Export, LogboxError, Tail

__all__ = ["Client", "Export", "LogboxError", "Tail"]
