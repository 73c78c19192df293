#!/usr/bin/env python3
"""A nightshift worker for a remote AI-agent API, standard library only.

nightshift runs it once per item (attempt): the item's payload as JSON on
stdin, its idempotency key in NIGHTSHIFT_KEY. It starts a remote operation,
reports the operation's id at once, waits for it and prints the result. If
the attempt dies or times out, the next attempt gets the id back in
NIGHTSHIFT_OP_ID and resumes that operation instead of paying for a new one.

How it answers (the worker contract, README "The worker contract"):
  exit 0, JSON on stdout     done; the JSON is stored as the item's result
  exit 0, nothing on stdout  outcome "empty": succeeded with nothing, kept apart
  exit 75 + error line       transient (429, 503, network, still running): retried
  exit 1  + error line       permanent (the API refused the input): quarantined

Usage: worker = ["python3", "worker.py", "https://agent.example.com/v1"]
Environment: API_TOKEN (a bearer token), WAIT_S (how long to wait for the
operation before handing it to a later attempt, default 300), POLL_S (2).
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request

API = (sys.argv[1] if len(sys.argv) > 1 else "https://agent.example.com/v1").rstrip("/")
TOKEN = os.environ.get("API_TOKEN", "")
WAIT_S = float(os.environ.get("WAIT_S", "300"))
POLL_S = float(os.environ.get("POLL_S", "2"))
TEMPFAIL = 75  # EX_TEMPFAIL: "try again later"


def fail(error_class, message, transient, retry_after_s=None):
    """Ends the attempt with the error line nightshift reads: the last line
    on stderr, a JSON object. It overrides the exit-code rule."""
    line = {"error_class": error_class, "transient": transient, "message": message[:500]}
    if retry_after_s is not None:
        line["retry_after_s"] = retry_after_s
    print(json.dumps(line), file=sys.stderr, flush=True)
    sys.exit(TEMPFAIL if transient else 1)


def call(method, path, body=None, missing_ok=False):
    headers = {
        "Accept": "application/json",
        # The same key on every attempt of this item: the API does the work
        # (and charges for it) once, however often the call is repeated.
        "Idempotency-Key": os.environ["NIGHTSHIFT_KEY"],
    }
    if TOKEN:
        headers["Authorization"] = "Bearer " + TOKEN
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(API + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)
    except urllib.error.HTTPError as e:
        text = e.read(300).decode("utf-8", "replace").strip()
        if e.code == 404 and missing_ok:
            return None
        retry_after = e.headers.get("Retry-After", "")
        retry_after = int(retry_after) if retry_after.isdigit() else None
        if e.code == 429:  # holds the whole batch for retry_after_s
            fail("RateLimitError", f"429 Too Many Requests: {text}", True, retry_after)
        if e.code in (502, 503, 504):
            fail("ServiceUnavailable", f"{e.code} {e.reason}: {text}", True, retry_after)
        if e.code >= 500:
            fail("ServerError", f"{e.code} {e.reason}: {text}", True)
        fail(f"HTTP{e.code}", f"{e.code} {e.reason}: {text}", False)
    except (urllib.error.URLError, OSError) as e:  # refused, reset, DNS, timeout
        fail("ConnectionError", str(getattr(e, "reason", e)), True)


def main():
    payload = json.load(sys.stdin)
    op = None
    op_id = os.environ.get("NIGHTSHIFT_OP_ID")
    if op_id:
        # An earlier attempt started it: resume, do not pay again.
        op = call("GET", f"/operations/{op_id}", missing_ok=True)
    if op is None:
        op = call("POST", "/operations", {"task": "format_article", "input": payload})
        # Report the id at once: if this attempt dies, the next one gets it.
        print(f"@nightshift op_id={op['id']}", file=sys.stderr, flush=True)
    deadline = time.monotonic() + WAIT_S
    while not op.get("done"):
        if time.monotonic() > deadline:
            fail("OperationPending", f"operation {op['id']} is still running", True)
        time.sleep(POLL_S)
        op = call("GET", f"/operations/{op['id']}")
    if op.get("error"):
        error = op["error"]
        fail(error.get("type", "OperationFailed"), error.get("message", ""), False)
    if not op.get("result"):
        return  # exit 0 with nothing on stdout: outcome "empty"
    print(json.dumps({"op_id": op["id"], "result": op["result"], "cost": op.get("cost", 0)}))


if __name__ == "__main__":
    main()
