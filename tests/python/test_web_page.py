"""The web page at / in a real headless browser (Debian's chromium and
chromium-driver, driven by selenium from the venv) against `tandem serve` with
SmolLM2 and the n-gram drafter: the page loads and names the model, a message
sent through the page streams back (several chunks rendered as they arrive),
the text equals what the API gives for the same greedy request, and the
figures the page shows (tokens, tokens/s, acceptance) are the server's own: its
final stream chunk's, and the deltas of its /metrics counters over the request.
The stream carries per-token draft flags (the "tandem": {"tokens": [...]}
extension), and the colouring is checked: one span per token, as many accepted
drafts as the server counted.

A screenshot goes to $TANDEM_CACHE/screenshots/web-ui.png. Without chromium,
chromium-driver or selenium the test is skipped (exit code 77, ctest's SKIP)."""
import os
import shutil
import sys
import time
from pathlib import Path

from test_server import CACHE, MODEL_NAME, ServerProcess, check, finish

SKIP = 77


def find_browser():
    """(chromium, chromedriver) paths, or exits with SKIP naming what is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    missing = [name for name, path in [("chromium", chromium), ("chromium-driver", driver)]
               if not path]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (the venv's PyPI packages)")
    if missing:
        print(f"SKIP: {', '.join(missing)} not installed (scripts/setup.sh installs them)")
        sys.exit(SKIP)
    return chromium, driver


def open_browser(chromium, driver_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1200,760", "--force-device-scale-factor=1"]:
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=driver_path), options=opts)


def wait_for(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout} s waiting for {what}")


PROMPT = ("Repeat this sentence twice: the quick brown fox jumps over the lazy dog "
          "and the quick brown fox runs away.")
MAX_TOKENS = 64


def main():
    t_start = time.time()
    chromium, driver_path = find_browser()
    from selenium.webdriver.common.by import By

    srv = ServerProcess("--draft", "ngram", "-k", 4, "--draft-always")
    browser = None
    try:
        browser = open_browser(chromium, driver_path)
        browser.get(srv.base + "/")
        check(browser.title == "tandem", "the page loads", browser.title)
        name = wait_for(lambda: browser.find_element(By.ID, "model-name").text.strip() not in ("", "…")
                        and browser.find_element(By.ID, "model-name").text, 30, "the model name")
        check(name == MODEL_NAME, "the page names the served model", name)

        # Greedy, so that the page's answer can be compared with the API's.
        browser.execute_script(
            "document.getElementById('temperature').value = '0';"
            "document.getElementById('temperature-range').value = '0';"
            f"document.getElementById('max-tokens').value = '{MAX_TOKENS}';"
            "document.getElementById('system').value = 'You are a helpful assistant.';")
        check(browser.find_element(By.ID, "speculate").is_selected(), "speculation is on by default")
        before = srv.metrics()
        box = browser.find_element(By.ID, "input")
        box.send_keys(PROMPT)
        browser.find_element(By.ID, "send").click()
        answer = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, ".msg.assistant[data-done='1']"),
                          120, "the streamed answer")[0]
        data = lambda key: answer.get_attribute("data-" + key)  # noqa: E731
        text = "".join(s.get_attribute("textContent") for s in answer.find_elements(By.CSS_SELECTOR, ".tok"))
        check(len(text.strip()) > 0, "the answer appeared", repr(text))
        check(int(data("chunks") or 0) > 1, "the answer was streamed in several chunks", data("chunks"))

        # The same request through the API gives the same text.
        ref = srv.client.chat.completions.create(
            model=MODEL_NAME, temperature=0, max_tokens=MAX_TOKENS,
            messages=[{"role": "system", "content": "You are a helpful assistant."},
                      {"role": "user", "content": PROMPT}])
        check(text == ref.choices[0].message.content, "the page shows what the server generated",
              f"page {text!r} vs API {ref.choices[0].message.content!r}")

        # The figures are the server's: the final chunk's stats and /metrics over the request.
        after = srv.wait_metric(lambda m: m["tandem_requests_finished_total{finish_reason=\"stop\"}"]
                                + m["tandem_requests_finished_total{finish_reason=\"length\"}"]
                                >= 2, timeout=10)
        tokens, drafted, accepted = int(data("completion-tokens")), int(data("drafted")), int(data("accepted"))
        check(tokens == ref.usage.completion_tokens, "the page counts the server's tokens",
              f"{tokens} vs {ref.usage.completion_tokens}")
        gen_delta = after["tandem_generation_tokens_total"] - before["tandem_generation_tokens_total"]
        check(gen_delta == tokens + ref.usage.completion_tokens, "/metrics agrees on the tokens",
              f"{gen_delta}")
        drafted_delta = (after["tandem_spec_drafted_tokens_total"]
                         - before["tandem_spec_drafted_tokens_total"])
        accepted_delta = (after["tandem_spec_accepted_tokens_total"]
                          - before["tandem_spec_accepted_tokens_total"])
        ref_stats = ref.model_extra["tandem"]
        check(drafted + ref_stats["drafted"] == drafted_delta
              and accepted + ref_stats["accepted"] == accepted_delta,
              "the page's drafted/accepted counts are the server's",
              f"page {accepted}/{drafted}, API {ref_stats['accepted']}/{ref_stats['drafted']}, "
              f"metrics {accepted_delta}/{drafted_delta}")
        check(drafted > 0, "the n-gram drafter drafted on a repetitive answer", str(drafted))
        shown_accept = browser.find_element(By.ID, "stat-accept").text
        expected_accept = f"{round(100 * accepted / drafted)}%" if drafted else "–"
        check(shown_accept == expected_accept, "the acceptance rate shown is the server's",
              f"{shown_accept} vs {expected_accept}")
        shown_tps = browser.find_element(By.ID, "stat-tps").text
        check(abs(float(shown_tps) - float(data("decode-tok-per-s"))) < 0.051 and float(shown_tps) > 0,
              "tokens/s shown is the server's decode rate", f"{shown_tps} vs {data('decode-tok-per-s')}")
        check(browser.find_element(By.ID, "stat-tokens").text == str(tokens), "the token count is shown")

        spans = answer.find_elements(By.CSS_SELECTOR, ".tok")
        draft_spans = answer.find_elements(By.CSS_SELECTOR, ".tok.draft")
        # The stream says which tokens came from accepted drafts: check the colouring.
        check(data("token-flags") == "1", "the stream carried per-token draft flags")
        check(len(spans) == tokens, "one coloured span per token", f"{len(spans)} vs {tokens}")
        check(len(draft_spans) == accepted, "as many draft-coloured tokens as accepted drafts",
              f"{len(draft_spans)} vs {accepted}")

        shots = CACHE / "screenshots"
        shots.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(shots / "web-ui.png"))
        print(f"screenshot: {shots / 'web-ui.png'}")
        logs = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
        check(not logs, "no errors in the browser console", str(logs))
    finally:
        if browser is not None:
            browser.quit()
        srv.stop()
    finish(t_start, "all checks passed")


if __name__ == "__main__":
    main()
