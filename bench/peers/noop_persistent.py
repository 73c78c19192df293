#!/usr/bin/env python3
"""A no-op persistent worker: answers every request at once (empty result)."""
import json, sys

out = sys.stdout
dumps, loads = json.dumps, json.loads
for line in sys.stdin:
    out.write('{"key":%s,"result":null}\n' % dumps(loads(line)["key"]))
    out.flush()
