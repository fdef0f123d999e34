"""The SDK's exceptions: one base, and one class per kind of refusal a caller handles apart.

How an error reply of `cordon serve` (docs/api.md, "Errors") maps:

- 404 (``not_found``, ``no_route``, ``no_key``)            -> NotFound
- 401 ``unauthorized``; 403 ``forbidden`` (the token lacks the scope) and
  403 ``forbidden_peer`` (another uid on the unix socket)   -> Unauthorized
- every other 4xx: 400 (malformed input), 403 ``denied`` (refused by policy), 405, 409
  (``shut_down``, ``conflict``, ``race_running``), 413, 422 -> Refused
- 5xx, a broken connection, a reply that is not the API's   -> CordonError itself

A command that fails inside the sandbox is not an exception: exec returns its exit code.
"""

from __future__ import annotations


class CordonError(Exception):
    """Base of every SDK error. ``status`` is the HTTP status (0 when there was no reply),
    ``code`` the API's error code (``"internal"``, ``"not_found"``, ...), ``message`` its text."""

    def __init__(self, message: str, *, status: int = 0, code: str = "") -> None:
        super().__init__(message if not code else f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class NotFound(CordonError):
    """No such session, snapshot, backend, file, race or route (404)."""


class Refused(CordonError):
    """The server refused the request as it stands: bad input (400), a policy refusal
    (403 ``denied``), a session already shut down (409), a missing capability (422), ..."""


class Unauthorized(CordonError):
    """No or a bad token (401), or a token or peer not allowed this route (403
    ``forbidden``, ``forbidden_peer``)."""


_UNAUTHORIZED_CODES = {"unauthorized", "forbidden", "forbidden_peer"}


def error_for(status: int, code: str, message: str) -> CordonError:
    """The exception for an error reply (pure: no I/O)."""
    if status == 404:
        cls: type[CordonError] = NotFound
    elif status == 401 or (status == 403 and code in _UNAUTHORIZED_CODES):
        cls = Unauthorized
    elif 400 <= status < 500:
        cls = Refused
    else:
        cls = CordonError
    return cls(message, status=status, code=code)
