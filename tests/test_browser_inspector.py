"""The Inspect page in a real browser: it renders its figures without an exception, exports them, and a click in
the enlarged head reruns only its fragment; screenshots go to artifacts/."""
import time
from pathlib import Path

from browser_support import ARTIFACTS, full_page_screenshot, open_tab, screenshot, wait_until_drawn

from gptcore import checkpoint as ckpt
from gptcore import folders
from gptcore.runs import SHIPPED

WIDTH, HEIGHT = 1400, 1000


def open_inspector(open_page, app_url: str, **options):
    """The Inspect page reached the way a reader does: through the sidebar navigation."""
    page = open_page(WIDTH, HEIGHT, **options)
    page.goto(app_url, timeout=60_000)
    nav = page.get_by_test_id("stSidebarNavItems")
    nav.get_by_role("link", name="Inspect", exact=True).click(timeout=60_000)
    page.get_by_role("heading", name="Inspect a trained model").wait_for(timeout=60_000)
    # the grid and the enlarged head of the first tab are drawn by Plotly in the browser
    page.locator(".js-plotly-plot .heatmaplayer").nth(1).wait_for(timeout=60_000)
    wait_until_drawn(page)
    return page


def test_the_attention_tab_draws_and_exports_its_figures(app_url, open_page):
    page = open_inspector(open_page, app_url, accept_downloads=True)
    assert page.get_by_role("combobox", name="Checkpoint").input_value() == SHIPPED
    assert page.locator("[data-testid='stException']").count() == 0
    full_page_screenshot(page, "inspector-attention", WIDTH, HEIGHT)
    # exports: Plotly's modebar PNG, our HTML copy, the attention tensor as NPY
    grid = page.locator(".js-plotly-plot").first
    grid.hover()
    with page.expect_download(timeout=60_000) as png:
        grid.locator('.modebar-btn[data-title="Download plot as a PNG"]').click()
    assert png.value.suggested_filename == f"attention-grid-{SHIPPED}.png"
    with page.expect_download(timeout=60_000) as html:
        page.get_by_role("button", name="Download as HTML").first.click()
    assert "plotly" in Path(html.value.path()).read_text()[:100_000].lower()
    with page.expect_download(timeout=60_000) as npy:
        page.get_by_role("button", name="Attention as NPY").click()
    assert Path(npy.value.path()).read_bytes()[:6] == b"\x93NUMPY"
    assert (ARTIFACTS / "inspector-attention.png").stat().st_size > 10_000


def test_every_tab_draws_and_over_training_starts_at_the_final_step(app_url, open_page):
    page = open_inspector(open_page, app_url)
    for tab, shot in (("Predictions", "inspector-predictions"), ("Head finder", "inspector-heads"),
                      ("Over training", "inspector-training")):
        open_tab(page, tab)  # the tabs are lazy: opening one runs its part
        assert page.locator("[data-testid='stException']").count() == 0, tab
        full_page_screenshot(page, shot, WIDTH, HEIGHT)
    # the slider's default is the final step: the grid and the score curves of "Over training" are drawn
    page.locator(".js-plotly-plot .heatmaplayer").first.wait_for(timeout=60_000)
    final_step = ckpt.load_checkpoint(folders.CHECKPOINT_ROOT / SHIPPED).meta["step"]
    assert page.get_by_text(f"Attention at step {final_step}").count() >= 1
    assert page.locator(".js-plotly-plot").count() == 2


class Runs:
    """The script runs the server starts, read from its websocket frames: each ForwardMsg new_session names the
    fragments it reruns (none for a whole-page run); script_finished ends it. Bytes count everything sent."""

    def __init__(self, page):
        self.clear()
        page.on("websocket", lambda ws: ws.on("framereceived", self.received))

    def clear(self) -> None:
        self.fragment_ids, self.finished, self.bytes = [], 0, 0

    def received(self, payload) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        data = payload if isinstance(payload, bytes) else payload.encode()
        self.bytes += len(data)
        msg = ForwardMsg()
        try:
            msg.ParseFromString(data)
        except Exception:  # noqa: BLE001 (not a ForwardMsg)
            return
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            self.fragment_ids.append(list(msg.metadata.run.fragment_ids))
        elif kind == "script_finished":
            self.finished += 1


def test_a_head_or_query_click_reruns_only_its_fragment(app_url, open_page):
    """#17: choosing a head, a layer or a query reruns the fragment of the enlarged head, not the page: the
    forward pass, the grid of every head and the rest of the page are neither recomputed nor sent again."""
    head_title = "() => document.querySelector('.st-key-inspect-head-figure .gtitle')?.textContent || ''"
    query_caption = """() => [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
        .map(e => e.innerText).find(t => t.includes('the boxed character is the query')) || ''"""
    page = open_page(1440, 900)
    runs = Runs(page)
    page.goto(f"{app_url}/inspector", timeout=60_000)
    page.locator(".st-key-inspect-head-figure .gtitle").wait_for(timeout=60_000)
    wait_until_drawn(page)

    def rerun_after(act, signature: str) -> None:
        before = page.evaluate(signature)
        runs.clear()
        act()
        page.wait_for_function("([f, before]) => eval(f)() !== before", arg=[signature, before],
                               timeout=30_000)
        deadline = time.monotonic() + 30
        while not runs.finished and time.monotonic() < deadline:
            page.wait_for_timeout(50)
        assert runs.fragment_ids and all(runs.fragment_ids), runs.fragment_ids  # fragment runs only
        assert runs.bytes < 300_000, runs.bytes  # (the grid of all 16 heads alone is over 300 kB)

    for key in ("inspect-head", "inspect-layer"):
        buttons = page.locator(f".st-key-{key} button")
        chosen = [b.get_attribute("aria-checked") for b in buttons.all()].index("true")
        rerun_after(buttons.nth((chosen + 1) % buttons.count()).click, head_title)
    point = page.locator(".st-key-inspect-head-figure .scatterlayer .point").nth(20)
    point.scroll_into_view_if_needed()
    box = point.bounding_box()
    rerun_after(lambda: page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2),
                query_caption)
    assert "position 20 '" in page.evaluate(query_caption)  # the clicked character is the query
    assert page.locator("[data-testid='stException']").count() == 0

    page.goto(f"{app_url}/inspector?lang=zh", timeout=60_000)
    page.locator(".st-key-inspect-head-figure .gtitle").wait_for(timeout=60_000)
    wait_until_drawn(page)
    screenshot(page, "inspector-attention-zh")
    assert page.get_by_role("heading", name="检视一个训练好的模型").count() == 1


def test_a_click_on_the_head_atlas_opens_that_head(app_url, open_page):
    """The head atlas is a map of every head's score; a click on one cell opens that head below it, and the
    Attention tab then enlarges the same head."""
    from browser_support import after_rerun

    page = open_inspector(open_page, app_url)
    open_tab(page, "Head finder")
    opened = "() => [...document.querySelectorAll('[data-testid=\"stMarkdownContainer\"]')]" \
             ".map(e => e.innerText).find(t => t.startsWith('Opened: ')) || ''"
    before = page.evaluate(opened)
    # the first map's points, one per head in reading order: the last is the last layer's last head
    points = page.locator(".st-key-inspect-atlas .scatterlayer .trace").first.locator(".point")
    target = points.nth(points.count() - 1)
    target.scroll_into_view_if_needed()
    box = target.bounding_box()
    after_rerun(page, lambda: page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2))
    page.wait_for_function(f"() => ({opened})() !== {before!r}", timeout=30_000)
    last = page.evaluate(opened).split(":")[1].strip()
    assert last == "L3H3" and before != page.evaluate(opened)  # the shipped model's last head (4 layers × 4 heads)
    assert page.locator("[data-testid='stException']").count() == 0
    open_tab(page, "Attention")
    title = page.locator(".st-key-inspect-head-figure .gtitle").text_content()
    assert title.startswith("L3H3:")
