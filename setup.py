"""The NEM12 reader's hot loop in C (``freehours/meterdata/nem12/_rows.c``), the one part of the
build that pyproject.toml does not declare (setuptools' table for it is still experimental).

Optional: a machine without a C compiler still installs, and reads every row through the same
code in pure Python (``freehours.meterdata.nem12.common._read_row``), about a quarter slower.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "freehours.meterdata.nem12._rows",
            ["freehours/meterdata/nem12/_rows.c"],
            optional=True,
        )
    ]
)
