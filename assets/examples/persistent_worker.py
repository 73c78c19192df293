#!/usr/bin/env python3
# A persistent-mode worker (mode = "persistent"): started once per slot, it
# pays its start-up (an SDK import) once, then answers one JSON line per item.
import json, sys
# import anthropic                             # a heavy import: paid once per slot

for line in sys.stdin:                          # one request per line, in order
    req = json.loads(line)                      # key, label, attempt, op_id, run_id, payload
    item = req["payload"]
    if not item.get("title"):                   # permanent: quarantined for a human
        answer = {"error": {"error_class": "NoTitle", "transient": False, "message": "no title"}}
    else:                                       # {"result": null} would be outcome "empty"
        answer = {"result": {"words": len(item["title"].split())}}
    answer["key"] = req["key"]                  # required: how the answer finds its request
    print(json.dumps(answer, allow_nan=False), flush=True)  # stdout is the protocol: log to stderr
