#!/usr/bin/env python3
# The smallest useful nightshift worker: payload on stdin, result on stdout.
import json, os, sys
item = json.load(sys.stdin)                     # the item's payload
key = os.environ["NIGHTSHIFT_KEY"]              # the same on every attempt: for the API
if not item.get("title"):                       # permanent: quarantined for a human
    error = {"error_class": "NoTitle", "transient": False, "message": "no title"}
    print(json.dumps(error), file=sys.stderr)   # the last stderr line says why
    sys.exit(1)                                 # (exit 75 would mean: retry later)
print(json.dumps({"key": key, "words": len(item["title"].split())}))   # exit 0: done
