#!/usr/bin/env python3
# A persistent worker for a paid AI API: it reports each call's token usage
# (the pool settles its reservation with it) and turns a 429's retry-after
# header into retry_after_s, which holds every batch of the pool until then.
import json, os, sys, urllib.error, urllib.request

API = os.environ.get("API_URL", "https://api.example.com/v1/messages")

def call(req):
    body = json.dumps({"prompt": req["payload"]["prompt"], "max_tokens": 1024}).encode()
    http = urllib.request.Request(API, body, {
        "Content-Type": "application/json",
        "Idempotency-Key": req["key"],          # a retried request is not paid twice
    })
    try:
        with urllib.request.urlopen(http, timeout=120) as r:
            reply = json.load(r)
    except urllib.error.HTTPError as e:
        error = {"error_class": f"HTTP{e.code}", "transient": e.code in (429, 500, 502, 503),
                 "message": e.reason}
        if e.code == 429 and e.headers.get("retry-after", "").isdigit():
            error["retry_after_s"] = int(e.headers["retry-after"])   # the pool waits this long
        return {"error": error}
    except (urllib.error.URLError, TimeoutError) as e:
        return {"error": {"error_class": "Network", "transient": True, "message": str(e)}}
    answer = {"result": {"text": reply.get("text")}}
    if "usage" in reply:                        # {"input_tokens": N, "output_tokens": M}
        answer["usage"] = reply["usage"]
    return answer

for line in sys.stdin:                          # one request per line, in order
    req = json.loads(line)
    answer = call(req)
    answer["key"] = req["key"]
    print(json.dumps(answer, allow_nan=False), flush=True)
