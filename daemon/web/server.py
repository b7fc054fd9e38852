"""The web server: an aiohttp application run as one task of the daemon's TaskGroup.

Security: with no token it answers only requests whose Host is a loopback name (a page elsewhere
cannot reach it through DNS rebinding); with `web.token` every request carries the token
(Authorization: Bearer, `?token=`, or the HttpOnly SameSite=Strict cookie set when the page is
opened with `?token=`). Asking wants `Content-Type: application/json`, which a page of another
origin cannot send without a CORS preflight, and none is granted. Everything the page loads comes
from `static/`, under a Content-Security-Policy of 'self'. A port already taken does not end the
daemon: the server says so and tries again.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import socket
import sys
from pathlib import Path

from aiohttp import web

from daemon.web.api import MAX_BODY, Api, Coded, json_response
from daemon.web.config import WebSettings, is_loopback

logger = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
COOKIE = "chorus_token"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png"}
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                               "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
}


class WebServer:
    def __init__(self, settings: WebSettings, api: Api):
        self.settings, self.api = settings, api
        self.token = settings.token.get_secret_value().strip() if settings.token else None
        self.files = {p.name: p for p in STATIC.iterdir() if p.suffix in TYPES}  # fixed at start
        self.url: str | None = None

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard], client_max_size=MAX_BODY)
        app.add_routes([web.get("/", self.index), web.get("/static/{name}", self.static), *self.api.routes()])
        app.on_response_prepare.append(_security_headers)
        return app

    async def run(self) -> None:
        runner = web.AppRunner(self.app(), access_log=None, handle_signals=False, shutdown_timeout=2.0)
        await runner.setup()
        host, port = self.settings.host, self.settings.port
        try:
            delay = 2.0
            while True:
                try:
                    await web.TCPSite(runner, host, port, reuse_address=True).start()
                    break
                except OSError as e:  # the page is not worth the memory: keep serving MQTT, try again
                    logger.error("web page not served: cannot listen on %s:%d (%s); trying again in %.0fs",
                                 host, port, e, delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 60.0)
            shown = socket.gethostname() if host in ("0.0.0.0", "::", "") else host
            self.url = f"http://{'[' + shown + ']' if ':' in shown else shown}:{port}/"
            hint = " with ?token=<web.token> once" if self.token else ""
            print(f"chorus: web page: open {self.url} in a browser{hint}", file=sys.stderr, flush=True)
            logger.info("web page and API on %s", self.url)
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    # -- pages ----------------------------------------------------------------------------------
    async def index(self, request: web.Request) -> web.Response:
        resp = self._file("index.html")
        given = request.query.get("token")
        if self.token and given:  # checked by the guard: remember it, so the page needs no token in URLs
            resp.set_cookie(COOKIE, given, httponly=True, samesite="Strict", path="/",
                            secure=request.secure or request.headers.get("X-Forwarded-Proto") == "https")
        return resp

    async def static(self, request: web.Request) -> web.Response:
        return self._file(request.match_info["name"])

    def _file(self, name: str) -> web.Response:
        path = self.files.get(name)  # a name from the request only picks among the files found at start
        if path is None:
            raise Coded("not_found", f"no file {name[:64]!r}")
        return web.Response(body=path.read_bytes(),
                            headers={"Content-Type": TYPES[path.suffix], "Cache-Control": "no-cache"})

    # -- the guard ------------------------------------------------------------------------------
    @web.middleware
    async def _guard(self, request: web.Request, handler) -> web.StreamResponse:
        try:
            self._admit(request)
            self.api.requests += 1
            return await handler(request)
        except Coded as e:
            return e.response()
        except web.HTTPRequestEntityTooLarge:
            return Coded("too_large", f"the body is larger than {MAX_BODY} bytes").response()
        except web.HTTPMethodNotAllowed as e:
            return Coded("unsupported", f"{request.method} is not allowed here (only {', '.join(e.allowed_methods)})"
                         ).response()
        except web.HTTPNotFound:
            return Coded("not_found", f"nothing at {request.path[:100]}").response()
        except web.HTTPException as e:
            return json_response({"status": "error", "code": "bad_schema", "error": e.reason}, e.status)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as e:  # one bad request never ends the server
            logger.exception("%s %s", request.method, request.path)
            return Coded("internal", f"{type(e).__name__}: {e}").response()

    def _admit(self, request: web.Request) -> None:
        if self.token:
            auth = request.headers.get("Authorization", "")
            given = (auth[7:].strip() if auth[:7].lower() == "bearer " else None) or request.query.get("token") \
                or request.cookies.get(COOKIE)
            if not given or not hmac.compare_digest(given.encode(), self.token.encode()):
                raise Coded("unauthorized", "a token is wanted: Authorization: Bearer <web.token>, or open the "
                                            "page once with ?token=<web.token>")
            return
        host = (request.host or "").rsplit(":", 1)[0] if not (request.host or "").startswith("[") \
            else request.host[1:].split("]")[0]
        if not is_loopback(host):
            raise Coded("not_allowed", f"Host {host[:64]!r} is not served without a token: open "
                                       f"http://127.0.0.1:{self.settings.port}/ or set web.token")


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    for k, v in HEADERS.items():
        response.headers.setdefault(k, v)
