"""Every docstring example in the package runs and prints what it says (doctest).

Run through ``doctest`` itself rather than pytest's doctest plugin, whose output capture
occasionally lost an example's printed value while runtime worker threads were busy.
"""

import doctest
import importlib
import pkgutil

import pytest

import numtile

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(numtile.__path__, prefix="numtile.")
    if not info.name.startswith("numtile.ops_cuda")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS, verbose=False)
    report: list[str] = []
    for test in doctest.DocTestFinder().find(module, name):
        runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
