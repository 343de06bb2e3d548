"""Loads the dashboard in a real headless Chromium (Debian's, driven by Playwright)
while rows flow, and checks: no console error; query 1's plan graph has the expected
number of boxes; its boxes carry measured busy shares; the stream's row count moves;
query 1 (no constraint) shows none, query 2 (max_latency 200 ms) its rows' p50 and
p99 against it.
Prints `ok`, or what was wrong. Optional third argument: where to save a screenshot."""
import sys
import time

from playwright.sync_api import sync_playwright

url, boxes = sys.argv[1], int(sys.argv[2])
shot = sys.argv[3] if len(sys.argv) > 3 else None
CHROMIUM = "/usr/lib/chromium/chromium"

with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
    page = browser.new_page(viewport={"width": 1400, "height": 1250})
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_function("window.braid && window.braid.updates >= 3", timeout=20000)
    card = page.query_selector('[data-query="1"]')
    if card is None:
        sys.exit("no card for query 1")
    nodes = page.evaluate("window.braid.graphs[1].nodes().length")
    if int(card.get_attribute("data-nodes")) != boxes or nodes != boxes:
        sys.exit(f"query 1's graph has {nodes} boxes (card says {card.get_attribute('data-nodes')}), want {boxes}")
    measured = page.evaluate(
        "window.braid.graphs[1].nodes().filter(n => n.data('busy') !== undefined).length"
    )
    if measured == 0:
        sys.exit("no box of query 1 has a measured busy share")
    cell = 'tr[data-stream="calls"] td.rows'
    first = page.inner_text(cell)
    updates = page.evaluate("window.braid.updates")
    page.wait_for_function(f"window.braid.updates >= {updates + 2}", timeout=10000)
    second = page.inner_text(cell)
    if first == second:
        sys.exit(f"the stream's rows did not move: {first} then {second}")
    if page.inner_text('[data-query="1"] .constraint').strip():
        sys.exit("query 1 has no constraint, but its card shows one")
    try:
        page.wait_for_function(
            """() => { const c = document.querySelector('[data-query="2"] .constraint');
                       return c && /^max_latency 200 ms: rows p50 [0-9.]+ ms · p99 [0-9.]+ ms/.test(c.textContent); }""",
            timeout=10000,
        )
    except Exception:
        c = page.query_selector('[data-query="2"] .constraint')
        sys.exit(f"query 2's constraint line: {c.inner_text() if c else None!r}")
    if shot:
        page.screenshot(path=shot, full_page=True)
    browser.close()
if errors:
    sys.exit(f"console errors: {errors}")
print("ok")
