"""Build of the optional compiled loops ``numstd._native`` (everything else is in pyproject.toml).

The extension is optional: without a C compiler the build skips it with a warning and numstd
uses its numpy path, which gives bit-identical verdicts (tests/test_native.py).  The flags
keep IEEE semantics: no contraction of ``a*b + c`` into a fused multiply-add and no fast-math
reassociation, so the compiled loop rounds exactly as numpy does.
"""

import sys

from setuptools import Extension, setup

if sys.platform == "win32":
    flags = ["/O2", "/fp:precise"]
else:
    flags = ["-O3", "-ffp-contract=off", "-fno-fast-math"]

setup(ext_modules=[Extension("numstd._native", ["numstd/_native.c"], extra_compile_args=flags, optional=True)])
