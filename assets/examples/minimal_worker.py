#!/usr/bin/env python3
# The smallest useful nightshift worker: payload on stdin, result on stdout.
import json, os, sys
item = json.load(sys.stdin)                    # the item's payload
key = os.environ["NIGHTSHIFT_KEY"]             # the same on every attempt: dedupe remote calls with it
if not item.get("title"):                      # permanent: quarantined for a human (exit 75 = retry later)
    print(json.dumps({"error_class": "NoTitle", "transient": False, "message": "no title"}), file=sys.stderr)
    sys.exit(1)
print(json.dumps({"key": key, "words": len(item["title"].split())}))   # exit 0: done, this is the result
