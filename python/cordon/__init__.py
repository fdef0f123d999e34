"""cordon: a Python client of ``cordon serve``, the HTTP API of the cordon sandbox runtime.

    import cordon
    with cordon.Client() as client:             # a private server on a temporary socket
        with client.create(backend="ns") as sb:
            print(sb.exec(["echo", "hi"]).stdout)

``cordon.aio`` is the same surface for asyncio. Standard library only.
"""

from ._proto import ExecResult, Verdict
from .client import Client, ExecStream, Sandbox
from .errors import CordonError, NotFound, Refused, Unauthorized

__all__ = ["Client", "Sandbox", "ExecStream", "ExecResult", "Verdict", "CordonError",
           "NotFound", "Refused", "Unauthorized"]
__version__ = "0.1.0"
