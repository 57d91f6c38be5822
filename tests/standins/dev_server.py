"""A dev server as they behave in processes and in /tmp, for tests/processes/test_launchers.py:
started in the background (`npm run dev &`, `nohup … &`), it outlives the command that
started it, listens on a port of its own choosing (here: any free one on 127.0.0.1), and
writes a pid file at a fixed name in /tmp, as many do.

argv[1]: a report file (JSON: pid, port), written once it listens.
"""

from __future__ import annotations

import http.server
import json
import os
import sys
from pathlib import Path


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = os.environ.get("LANEWATCH_LANE", "?").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def main(report: Path) -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), Hello)
    Path("/tmp/dev-server.pid").write_text(f"{os.getpid()}\n")
    part = report.with_name(report.name + ".part")
    part.write_text(json.dumps({"pid": os.getpid(), "port": server.server_port}))
    part.rename(report)
    server.serve_forever()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
