"""The longest text each field of a household's document (invoice, credit note) holds: one limit
a field, in characters. ``freehours.documents.model`` checks a document against them, and the
plan format takes its limits on what a document shows of a plan from them, so that a plan that
can be stored can always be shown on its invoices."""

#: A plan's name on page 1 (its description, else its id): one line of the plan box, which
#: wraps to at most two.
MAX_PLAN_NAME = 120
#: A plan's id, shown beside its name: the ids customers and ``PUT /v1/plans/{id}`` name.
MAX_PLAN_ID = 64
#: A bill line's code (a band's type, ``PEAK``): the code column of the charges table.
MAX_LINE_CODE = 40
#: The customer's name, in the address block.
MAX_CUSTOMER_NAME = 80
#: An address, its lines joined with ", ": the address block's three lines.
MAX_ADDRESS = 150
#: A document's number ("INV-00000042"), in the header and every page's footer.
MAX_NUMBER = 40
#: An approved message (Better Bills Guideline, section 37): the box on page 1.
MAX_MESSAGE = 240
