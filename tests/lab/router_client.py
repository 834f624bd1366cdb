"""A client of SGLang's router for the lab tests (test_router_lab.py, test_pd_lab.py,
test_real_sglang_lab.py): requests, streamed generations, its healthy workers, and a client load
that counts what a user would have seen fail during a rollout."""

import json
import threading
import time
import urllib.error
import urllib.request


class RouterClient:
    """The router at `base_url` ("http://10.89.107.20:8080"), with `api_key` when it requires one."""

    def __init__(self, base_url, api_key=None, timeout=30):
        self.base_url, self.timeout = base_url, timeout
        self.auth = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def request(self, path, body=None, method=None, auth=True):
        """(status, body bytes); HTTP errors raise urllib.error.HTTPError."""
        req = urllib.request.Request(f"{self.base_url}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json", **(self.auth if auth else {})})
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            return resp.status, resp.read()

    def streamed_generation(self, text, tokens, **sampling):
        """(status, the `data:` events) of a streamed /generate."""
        status, raw = self.request("/generate", {"text": text, "stream": True,
                                                 "sampling_params": {"max_new_tokens": tokens, **sampling}})
        # SSE lines end in \n (or \r\n); not str.splitlines(), which also splits inside an event at U+0085,
        # U+2028 or U+2029, characters a tiny model's text can hold unescaped in its JSON
        lines = (line.rstrip("\r") for line in raw.decode(errors="replace").split("\n"))
        return status, [line[6:] for line in lines if line.startswith("data: ")]

    def generates_in_full(self, tokens=24):
        """True when a streamed /generate ends with all its tokens and [DONE] (ignore_eos: a tiny
        model may otherwise stop early, which is not a failure)."""
        try:
            status, events = self.streamed_generation("hello router", tokens, ignore_eos=True)
        except Exception:  # connection refused or reset, HTTP error: the user saw a failure
            return False
        if status != 200 or len(events) < 2 or events[-1] != "[DONE]":
            return False
        try:
            return json.loads(events[-2])["meta_info"]["completion_tokens"] == tokens
        except (ValueError, KeyError, TypeError):  # an event that is not what SGLang sends: a failure, counted
            return False

    def workers(self):
        """The URLs of the workers the router lists as healthy, sorted."""
        return sorted(w["url"] for w in json.loads(self.request("/workers")[1])["workers"] if w["is_healthy"])

    def answers(self, call):
        """call(), or None while the router does not answer (starting)."""
        try:
            return call()
        except (OSError, urllib.error.URLError):
            return None

    def wait_for(self, check, what, timeout=60):
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, f"timed out waiting until {what}: {self.request('/workers')[1][:2000]}"
            time.sleep(1)


class Load:
    """Clients sending streamed generations through the router, counting outcomes: back to back, or each
    client `pause` seconds after its last answer (a real server on the lab's two cores: a closed loop keeps
    it generating for the whole rollout, CPU the other lab modules wait for)."""

    def __init__(self, client, clients=4, tokens=24, pause=0.0):
        self.client, self.tokens, self.pause = client, tokens, pause
        self.ok = self.failed = 0
        self.done = []  # monotonic time of each request that succeeded
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(clients)]

    def run(self):
        while not self.stop.is_set():
            good = self.client.generates_in_full(self.tokens)
            with self.lock:
                self.ok, self.failed = self.ok + good, self.failed + (not good)
                if good:
                    self.done.append(time.monotonic())
            self.stop.wait(self.pause)

    def __enter__(self):
        for t in self.threads:
            t.start()
        time.sleep(2)
        return self

    def __exit__(self, *exc):
        time.sleep(2)
        self.stop.set()
        for t in self.threads:
            t.join(120)
