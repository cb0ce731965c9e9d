"""Build of the optional compiled loops ``numstd._native`` (everything else is in pyproject.toml).

The extension is optional: without a C compiler the build skips it with a warning and numstd
uses its numpy path, which gives bit-identical verdicts (tests/test_native.py).  The flags
keep IEEE semantics: no contraction of ``a*b + c`` into a fused multiply-add and no fast-math
reassociation, so the compiled loop rounds exactly as numpy does.
"""

import sys
import warnings

from setuptools import Extension, setup

# standards/ and reference_data/ ship as package data of numstd.standards and numstd.reference_data
# (pyproject.toml [tool.setuptools.package-data]); their subfolders (one per op, evidence, golden, ...)
# hold data only, so setuptools' "importable package absent from `packages`" warning (one screenful
# per folder on every install) does not apply to them: silenced for those two trees only.
warnings.filterwarnings("ignore", message=r"(?s).*Package 'numstd\.(standards|reference_data)\.[^']*' is absent")

if sys.platform == "win32":
    flags = ["/O2", "/fp:precise"]
else:
    flags = ["-O3", "-ffp-contract=off", "-fno-fast-math"]

# numpy's headers add the block-reusing allocator (numstd.native.pool); without them it is left out
try:
    import numpy

    include, macros = [numpy.get_include()], [("NUMSTD_NUMPY_POOL", "1")]
except ImportError:
    include, macros = [], []

setup(ext_modules=[Extension("numstd._native", ["numstd/_native.c"], include_dirs=include, define_macros=macros,
                             extra_compile_args=flags, optional=True)])
