"""The headers of every page the API serves (the console's, a document's HTML, the API's
documentation): one mechanism, each page naming only what it may load.

``X-Content-Type-Options: nosniff``: a browser takes the page (and a document's PDF) as the type
it is sent as, never guesses script or HTML from its bytes. ``Referrer-Policy: same-origin``:
an address with an invoice number or an NMI in it is not sent to another site. ``Cache-Control:
no-store``: pages with personal data are not kept by a browser or a proxy.
"""

from __future__ import annotations

#: What every page and download says, whatever its policy.
NOSNIFF = {"X-Content-Type-Options": "nosniff"}


def page_headers(policy: str) -> dict[str, str]:
    """The headers of a page whose ``Content-Security-Policy`` is ``policy``."""
    return {
        "Content-Security-Policy": policy,
        **NOSNIFF,
        "Referrer-Policy": "same-origin",
        "Cache-Control": "no-store",
    }
