"""The API's routes, one router per resource; ``freehours.api.app`` includes them in this
order, which is the order of the OpenAPI document.

A route declares its access once (``freehours.api.auth.requires``), finds the services in the
application's state (``AppServices``), and is thin: it checks limits, parses, calls the store,
the settlement service or the rating engine, and shapes the answer. Handlers that wait on the
database are plain ``def`` (run in the threadpool) or hand their work to a worker thread.
"""
