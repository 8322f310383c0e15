"""The one exception tree of freehours, drawn whole.

    FreehoursError              anything freehours raises on purpose
    +-- InputError              bad input from a user or a file: exit 2, HTTP 4xx
    |   +-- NEM12Error          a NEM12 file that cannot be read; names file, line and field
    |   |   +-- NEM12TooLarge   past one of its ReadLimits: HTTP 413       [meterdata.nem12]
    |   +-- PlanError           a tariff plan that is not valid; names file and key
    |   +-- UnknownPlan         a plan id neither stored nor built in      [store.catalog]
    |   +-- UnknownCustomer     an NMI without a customer, where one is needed  [store.catalog]
    |   +-- RegionMismatch      a plan of another region than its customer's  [store.catalog]
    |   +-- NotFound            what an operator's action names is missing [operations.actions]
    +-- ConfigurationError      settings or an environment that cannot work: exit 1
    |   +-- SpoolOwned          the agent's spool holds another API's batches  [agent.spool]
    |   +-- KeyRefused          the API refused the agent's key (401, 403)    [agent.sender]
    +-- CacheUnavailable        Redis not reached: go on with the database     [cache.quota]
    +-- RetryAfter              a job's attempt, not to be retried sooner         [jobs.job]
    +-- Unreachable             no answer from the API                          [agent.http]
    +-- Unsendable              a batch that cannot be made into a request      [agent.http]
    +-- MailNotSent             a document's email not sent this time: retried  [workers.mail]

    ValueError                  a value that cannot be; names the field (in a model: a 422)
    +-- RangeError              a value outside its range; names the field   [domain.reads]
    +-- CycleError              a billing cycle that cannot be             [domain.invoicing]
    +-- InvalidEndpoint         a webhook endpoint's field that cannot be   [domain.webhooks]
    +-- DocumentError           a document a household's page cannot hold  [documents.model]

    LookupError
    +-- NotFound                no such webhook endpoint: HTTP 404                [webhooks.service]
    OSError
    +-- DestinationRefused      a webhook host only at refused addresses          [webhooks.sender]
    RuntimeError
    +-- LayoutError             a document the PDF layout cannot hold        [documents.pdf]

    Exception                   signals between the parts of one service, never shown as such
    +-- TooManyEndpoints        webhook endpoints at their limit: HTTP 422        [webhooks.service]
    +-- StaleFence              a holder whose lock was taken over      [domain.settlement]
    +-- Problem                 an API error answer (problem+json)            [api.problems]
    +-- SignInRequired          the console's sign-in page, then back  [api.console.session]
    +-- ReadCancelled           a NEM12 read stopped: its client went away  [meterdata.nem12]
    +-- _BadValue               a kWh value text, reported with its place  [meterdata.nem12.common]
    +-- _Replayed               an invoice batch done before: roll back          [invoicing.service]
    +-- Stopped                 the agent stopping: ends a wait early        [agent.sender]
    +-- _AnsweredRetry          409, 429 or 5xx: the API could not take it   [agent.sender]
    +-- _AnsweredRefusal        a 4xx that resending cannot change           [agent.sender]
    +-- _NotFinal               a simulated client's answer to ask again on   [sim.clients]
    +-- WorkerDied              the legacy billing worker dying holding a lock [sim.legacy]
    +-- NotSent                 a mail server did not take a message this time [invoicing.smtp]
    |   +-- Refused             a mail server refused it for good (5xx)     [invoicing.smtp]
    +-- _Closed                 a kept SMTP connection found closed: made again [invoicing.smtp]
    BaseException
    +-- WorkerDied              a worker dying after its claim: nothing catches it [sim.replay]

The root and the branches that pure rules raise (``FreehoursError``, ``InputError``,
``PlanError``) are defined in ``freehours.domain.errors``, so that the domain imports nothing from
outside itself; everything else imports them from here. A subclass that concerns one package is
defined there, beside what raises it (the module in brackets, under ``freehours``).
``RangeError`` is a ``ValueError`` so that inside a pydantic model it becomes a 422 naming its
field; every other caller translates it into one of the tree's errors with what it knows (a
file's line, a read's number); so do the other ``ValueError``s of pure rules and models. The
classes under ``Exception`` are signals a part raises and catches itself (or the API turns into
its answer), never errors a caller handles. ``tests/test_errors.py`` keeps this drawing true: it
holds every exception class defined in the package, each under its own base.

Library errors are translated at the seam where they arise (``raise ... from exc``), so callers
only ever catch these.
"""

from __future__ import annotations

from freehours.domain.errors import FreehoursError, InputError, PlanError

__all__ = ["ConfigurationError", "FreehoursError", "InputError", "NEM12Error", "PlanError"]


class NEM12Error(InputError):
    """A NEM12 file that cannot be read.

    ``source`` is the file's name, ``line`` the 1-based physical line (None when the problem is
    the file as a whole), ``field`` the record field concerned (None when not one field).
    """

    def __init__(
        self, message: str, *, source: str, line: int | None = None, field: str | None = None
    ) -> None:
        self.reason = message
        self.source = source
        self.line = line
        self.field = field
        where = source if line is None else f"{source}:{line}"
        what = f" (field {field})" if field else ""
        super().__init__(f"{where}: {message}{what}")


class ConfigurationError(FreehoursError):
    """Settings or an environment that cannot work."""
