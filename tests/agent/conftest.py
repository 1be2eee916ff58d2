"""Imports the agent tests' torch optimizers need, done once at collection."""

from __future__ import annotations

# A torch optimizer's first construction imports torch._dynamo: 2-10 s of imports, paid by
# whichever test makes the first one. Importing it while the tests are collected lets
# mutmut's fork server (which collects, then forks a process per mutant) pay it once
# instead of once per mutant; a plain pytest run pays it once either way.
import torch._dynamo  # noqa: F401
