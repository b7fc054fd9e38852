"""The web page and HTTP API, served by the daemon in its own event loop (aiohttp): the page (ask,
timeline, now) is plain HTML, CSS and JavaScript from `static/`, and it uses only the API."""
