#!/usr/bin/env python3
"""A no-op persistent worker: answers every request at once (empty result)."""
import sys

out = sys.stdout
for line in sys.stdin:
    out.write('{"result":null}\n')
    out.flush()
