"""The page in a real browser: headless Chromium (Debian's ``chromium`` + ``chromium-driver``) driven by Selenium.

It uploads the example receptor, ligands and measured values, waits for the job, and reads the ranked table,
the 2D drawings and the plot; sorting by a column reorders the rows; every resource came from the server
itself (the page works offline). With ``GEOMOL_SCREENSHOTS=<folder>`` it also saves the screenshots used in
``docs/serve.md``::

    GEOMOL_SCREENSHOTS=docs/images python -m pytest tests/serve/test_browser.py
"""
from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.serve.conftest import EXAMPLE, needs_serve_extra

needs_serve_extra()

webdriver = pytest.importorskip("selenium.webdriver")
uvicorn = pytest.importorskip("uvicorn")
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="needs Debian's chromium and chromium-driver")

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1600,2000")
WAIT = 90.0


@pytest.fixture
def page_url(served):
    """The session's app served by uvicorn on a free loopback port (its workers are the session's)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(served.app, host="127.0.0.1", port=port, lifespan="off",
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield f"http://localhost:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def browser(tmp_path, monkeypatch):
    from selenium.webdriver.chrome.service import Service

    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager must not look for drivers on the network
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))
    yield driver
    driver.quit()


def _screenshot(driver, section: str, name: str) -> None:
    from selenium.webdriver.common.by import By

    folder = os.environ.get("GEOMOL_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.find_element(By.ID, section).screenshot(str(Path(folder) / name))


def _table(driver) -> tuple[list[str], list[list[str]]]:
    from selenium.webdriver.common.by import By

    table = driver.find_element(By.ID, "results-table")
    headers = [th.text.strip(" ↕▲▼") for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    rows = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    return headers, rows


def test_upload_wait_and_read_the_ranked_table_and_the_plot(served, page_url, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(page_url)
    wait = WebDriverWait(browser, WAIT)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"))
    assert "contact-corpus (default)" in browser.find_element(By.ID, "model").text
    for field, name in (("receptor", "tnks2_protein.pdb"), ("ligands", "tnks2_ligands.sdf"),
                        ("measured", "tnks2_measured.csv")):
        browser.find_element(By.ID, field).send_keys(str(EXAMPLE / name))
    _screenshot(browser, "submit", "serve_form.png")
    browser.find_element(By.ID, "submit-button").click()
    wait.until(lambda d: d.find_element(By.ID, "job-state").text.lower() in ("done", "failed"))
    assert browser.find_element(By.ID, "job-state").text.lower() == "done", browser.find_element(By.ID, "job-error").text
    wait.until(lambda d: len(_table(d)[1]) == 6)

    headers, rows = _table(browser)
    assert headers[:4] == ["rank", "ligand", "name", "pK"] and "measured pK" in headers
    job_id = browser.find_element(By.ID, "job-id").text
    expected = {r["name"]: r["pK"] for r in served.client.get(f"/v1/jobs/{job_id}/results.json").json()}
    shown = [(row[headers.index("name")], float(row[headers.index("pK")])) for row in rows]
    assert sorted(shown, key=lambda item: -item[1]) == shown  # ranked, best first
    assert {name: round(pk, 2) for name, pk in shown} == {name: round(pk, 2) for name, pk in expected.items()}
    assert [row[0] for row in rows] == [str(i) for i in range(1, 7)]
    loaded = "return [...arguments[0]].every(img => img.complete && img.naturalWidth > 0)"
    wait.until(lambda d: d.execute_script(loaded, d.find_elements(By.CSS_SELECTOR, "td.depiction img, #plot")))
    assert len(browser.find_elements(By.CSS_SELECTOR, "td.depiction img")) == 6
    assert browser.find_element(By.ID, "plot").is_displayed()
    assert "Pearson" in browser.find_element(By.ID, "plot-caption").text
    _screenshot(browser, "results", "serve_results.png")
    links = {a.text: a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "#downloads a")}
    assert set(links) == {"table (CSV)", "table (JSON)", "poses (SDF)", "plot (PNG)"}
    for href in links.values():  # the downloads are the job's own files
        assert href.startswith(f"{page_url}/v1/jobs/{job_id}/")
        assert served.client.get(href.removeprefix(page_url)).status_code == 200

    browser.find_element(By.CSS_SELECTOR, 'th[data-key="name"]').click()
    names = [row[headers.index("name")] for row in _table(browser)[1]]
    assert names == sorted(names)
    sources = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert sources and all(s.startswith(page_url) for s in sources), sources

    browser.get(f"{page_url}/v1/jobs/{job_id}/depictions/0.svg")  # a drawing opened on its own, under the CSP
    assert _mean_brightness(browser, 260, 190) > 0.8  # white background, dark lines: not a black box


def _mean_brightness(driver, width: int, height: int) -> float:
    """Mean brightness (0 black – 1 white) of the top-left ``width`` × ``height`` CSS pixels of the window."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("L")
    scale = image.width / driver.execute_script("return window.innerWidth")
    crop = image.crop((0, 0, int(width * scale), int(height * scale)))
    return sum(crop.getdata()) / (255 * crop.width * crop.height)
