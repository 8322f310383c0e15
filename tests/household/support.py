"""A served API with customers' pages on (a signing secret), invoices of two customers, and a
link to each one's page."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pydantic import SecretStr

from freehours.domain.page_links import sign
from freehours.settings import Settings
from freehours.store.database import Store
from freehours.store.invoices import StoredDocument
from tests.api.conftest import Api, serving
from tests.invoicing.support import System
from tests.mail.test_delivery import invoiced

SECRET = "a-page-secret-of-at-least-32-characters"


@dataclass
class Households:
    api: Api
    system: System
    jane: str
    pat: str
    documents: dict[str, StoredDocument]

    def token(self, nmi: str, *, days: int = 30) -> str:
        with self.api.services.store.write() as unit:
            page_id = unit.pages.page_for(nmi, at=self.api.clock.now())
        expires = int(self.api.clock.now().timestamp()) + days * 86_400
        return sign(page_id, expires, SECRET.encode())


@contextmanager
def households(store: Store, **settings: object) -> Iterator[Households]:
    configured = Settings(
        database_url="sqlite://",
        page_secret=SecretStr(SECRET),
        **settings,  # type: ignore[arg-type]
    )
    with serving(store, configured) as api:
        system, jane, pat = invoiced(store)
        documents = {d.nmi: d for d in system.documents()}
        yield Households(api, system, jane, pat, documents)
