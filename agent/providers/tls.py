"""One TLS context per process for the model SDKs' HTTP clients.

Every SDK client builds its own `ssl.SSLContext` and loads the system CA store into it: about
60 ms of CPU per client (`python -c` timing of `httpcore2.default_ssl_context()` on the 2-core
CI machine), paid by every runtime start, every one-shot and every test that starts a
provider. The context is the same every time and `ssl` contexts are meant to be shared between
connections, so it is built once, the SDK's own way (`httpcore2.default_ssl_context`:
`SSL_CERT_FILE`/`SSL_CERT_DIR` when set, the system store otherwise), and handed to each client
as `verify=`. Verification is unchanged: same CA store, hostname checks on.
"""

from __future__ import annotations

import functools
import ssl

__all__ = ["sdk_ssl_context"]


@functools.cache
def sdk_ssl_context() -> ssl.SSLContext:
    """The verifying client context the anthropic and openai SDKs would build, built once."""
    import httpcore2

    return httpcore2.default_ssl_context()
