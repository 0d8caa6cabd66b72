"""``ragsweep label`` as a user meets it, in headless Chromium (the driver of
tests/browser/test_mlflow_ui.py: Debian's chromium and chromedriver through Selenium).

The real command serves a small corpus (one document with text outside the Basic
Multilingual Plane before the passage, so code points and the browser's UTF-16 units
differ; one with a sentence written twice) and a golden set that does not exist yet. In the
browser: open a document, select a passage, type a question, save, reload the page; the case
is in the file, loads through the golden loader and resolves to the selected offsets. Then:
a quote that occurs twice asks which occurrence; a draft is reviewed and accepted; an edit
made on disk meanwhile is not overwritten; ten cases are labelled against the test's clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.browser.test_mlflow_ui import (  # the same browser, flags and install step
    RAGSWEEP,
    _stop,
    browser,  # noqa: F401 (a fixture)
)
from tests.conftest import write_jsonl

from ragsweep.config.schema import CorpusConfig, GoldenConfig
from ragsweep.core.names import ORIGIN_DRAFTED, STATUS_DRAFT
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden import EvidenceSpan, load_golden

pytestmark = pytest.mark.browser

WAIT_SECONDS = 20.0
ASTRAL = "Caf\u00e9 \U0001f600 r\u00e9sum\u00e9 \U0001d400\U0001d401.\n\n"
ROTATION = (
    ASTRAL + "# Tokens\n\nAPI tokens are rotated every 90 days by the platform team.\n"
    "Revoked tokens stop working within five minutes of revocation.\n"
)
TWICE = (
    "# Backups\n\nBackups run nightly at 02:00 UTC.\n\nRestores are self-service.\n\n"
    "## Archive\n\nBackups run nightly at 02:00 UTC.\nArchives are kept for a year.\n"
)
PASSAGE = "API tokens are rotated every 90 days"
REPEATED = "Backups run nightly at 02:00 UTC."
TIMED_CASES = 10
TIMING_FILE = Path(__file__).resolve().parents[2] / "outputs" / "browser" / "label_timing.json"


@dataclass
class LabelApp:
    """The served app: its URL and the project's files."""

    url: str
    root: Path

    @property
    def golden(self) -> Path:
        return self.root / "golden.jsonl"

    @property
    def drafts(self) -> Path:
        return self.root / "golden.drafts.jsonl"

    def load(self) -> Any:
        corpus = load_corpus(CorpusConfig(path=str(self.root / "corpus")))
        return load_golden(GoldenConfig(path=str(self.golden)), corpus)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabelApp]:
    """``ragsweep label --port 0`` over a two-document corpus, stopped at the end."""
    root = tmp_path_factory.mktemp("label")
    (root / "corpus").mkdir()
    (root / "corpus" / "rotation.md").write_text(ROTATION, encoding="utf-8")
    (root / "corpus" / "backups.md").write_text(TWICE, encoding="utf-8")
    draft = {
        "id": "draft-1",
        "question": "When do backups run",
        "type": "factual",
        "evidence": [{"doc": "backups.md", "quote": "Archives are kept for a year."}],
        "status": STATUS_DRAFT,
        "origin": ORIGIN_DRAFTED,
    }
    write_jsonl(root / "golden.drafts.jsonl", [draft])
    overrides = [f"corpus.path={root / 'corpus'}", f"golden.path={root / 'golden.jsonl'}"]
    log = root / "label.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [str(RAGSWEEP), "label", "--port", "0", *overrides],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        url = _url(process)
        assert url, log.read_text()[-2000:]
        yield LabelApp(url, root)
    finally:
        _stop(process)


def _url(process: subprocess.Popen[str]) -> str | None:
    """The URL ``ragsweep label`` prints once it has loaded Hydra and the corpus (None: it
    exited first). Lines are read whole: ``select`` on the pipe would miss a second line
    that arrived together with the first and sits in Python's buffer."""
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("Label app: "):
            return line.split()[2]
    return None


# --- page helpers -------------------------------------------------------------------------


def _wait(driver: Any, script: str, *args: Any) -> Any:
    """Poll the JavaScript ``script`` (a ``return ...``) until it is truthy."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        value = driver.execute_script(script, *args)
        if value:
            return value
        time.sleep(0.05)
    shown = driver.execute_script("return document.getElementById('error').textContent")
    raise AssertionError(f"timed out waiting for: {script} (the page says: {shown!r})")


def _open(driver: Any, url: str) -> None:
    driver.get(url)
    _wait(driver, "return document.body.dataset.ready === '1'")


def _open_doc(driver: Any, doc_id: str) -> None:
    from selenium.webdriver.common.by import By

    _wait(
        driver, "return document.querySelector(`#doc-list li[data-doc='${arguments[0]}']`)", doc_id
    )
    driver.find_element(By.CSS_SELECTOR, f"#doc-list li[data-doc='{doc_id}']").click()
    _wait(
        driver,
        "return document.getElementById('doc-title').textContent.endsWith(arguments[0])",
        doc_id,
    )


SELECT_TEXT = """
const [passage, nth] = arguments;
const pre = document.getElementById('doc-text');
const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
let seen = 0;
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  let at = node.data.indexOf(passage);
  while (at !== -1) {
    if (seen++ === nth) {
      const range = document.createRange();
      range.setStart(node, at);
      range.setEnd(node, at + passage.length);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      return true;
    }
    at = node.data.indexOf(passage, at + 1);
  }
}
return false;
"""


def _select(driver: Any, passage: str, nth: int = 0) -> None:
    """Select the ``nth`` occurrence of ``passage`` in the shown document, as a drag does."""
    assert driver.execute_script(SELECT_TEXT, passage, nth)
    _wait(driver, "return !document.getElementById('add-span').disabled")


def _click(driver: Any, element_id: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.ID, element_id).click()


def _type(driver: Any, element_id: str, text: str) -> None:
    from selenium.webdriver.common.by import By

    field = driver.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(text)


def _message(driver: Any, text: str) -> None:
    _wait(driver, "return document.getElementById('message').textContent === arguments[0]", text)


def _label(driver: Any, doc: str, passage: str, question: str, nth: int = 0) -> None:
    """Label one case: open ``doc``, select ``passage``, type ``question``, save."""
    _open_doc(driver, doc)
    _select(driver, passage, nth)
    _click(driver, "add-span")
    _type(driver, "question", question)
    _type(driver, "type", "factual")
    _click(driver, "save")


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


# --- the tests ------------------------------------------------------------------------------


def test_select_type_save_reload(browser: Any, app: LabelApp) -> None:  # noqa: F811
    """The issue's path: select, type, save, reload; the file's case resolves to the selection."""
    _open(browser, app.url)
    _label(browser, "rotation.md", PASSAGE, "How often are API tokens rotated?")
    _message(browser, "saved q-001")
    browser.refresh()
    _wait(browser, "return document.querySelector('#cases tr[data-id=\"q-001\"]')")
    (record,) = _records(app.golden)
    assert record["question"] == "How often are API tokens rotated?"
    assert record["evidence"] == [{"doc": "rotation.md", "quote": PASSAGE}]
    (case,) = app.load().cases
    start = ROTATION.index(PASSAGE)  # code points: the astral characters before it count once
    assert case.evidence == (EvidenceSpan("rotation.md", start, start + len(PASSAGE)),)
    assert case.type == "factual" and case.answerable


def test_mouse_selection(browser: Any, app: LabelApp) -> None:  # noqa: F811
    """A real double-click selects a word with the mouse; the saved span is that word."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    _open(browser, app.url)
    _open_doc(browser, "backups.md")
    pre = browser.find_element(By.ID, "doc-text")
    ActionChains(browser).move_to_element_with_offset(
        pre, -pre.size["width"] // 2 + 60, -pre.size["height"] // 2 + 14
    ).double_click().perform()
    word = _wait(browser, "return window.getSelection().toString().trim()")
    _click(browser, "add-span")
    _type(browser, "question", "What is the heading?")
    _click(browser, "save")
    _message(browser, "saved q-002")
    case = next(c for c in app.load().cases if c.id == "q-002")
    (span,) = case.evidence
    assert TWICE[span.start : span.end] == word


def test_quote_twice_asks_which(browser: Any, app: LabelApp) -> None:  # noqa: F811
    """A pasted quote that occurs twice lists both occurrences; the one picked is saved."""
    _open(browser, app.url)
    _open_doc(browser, "backups.md")
    _type(browser, "quote-find", REPEATED)
    _click(browser, "quote-go")
    _wait(
        browser, "return document.querySelectorAll('#occurrences button.occurrence').length === 2"
    )
    browser.execute_script("document.querySelectorAll('#occurrences button.occurrence')[1].click()")
    _type(browser, "question", "When do archived backups run?")
    _click(browser, "save")
    _message(browser, "saved q-003")
    record = _records(app.golden)[-1]
    assert record["evidence"] == [{"doc": "backups.md", "quote": REPEATED, "occurrence": 2}]
    case = next(c for c in app.load().cases if c.id == "q-003")
    second = TWICE.index(REPEATED, TWICE.index(REPEATED) + 1)
    assert case.evidence == (EvidenceSpan("backups.md", second, second + len(REPEATED)),)


def test_review_queue_accepts_a_draft(browser: Any, app: LabelApp) -> None:  # noqa: F811
    """A draft is not in the golden set until accepted; accepted (edited), it is, with
    ``origin: drafted``, and it has left the drafts file."""
    assert "draft-1" not in {c.id for c in app.load().cases}
    _open(browser, app.url)
    _wait(browser, "return document.querySelector('#drafts tr[data-id=\"draft-1\"]')")
    browser.execute_script("document.querySelector('#drafts tr[data-id=\"draft-1\"]').click()")
    _wait(browser, "return !document.getElementById('accept').hidden")
    _type(browser, "question", "How long are backup archives kept?")
    _click(browser, "accept")
    _message(browser, "accepted draft draft-1")
    case = next(c for c in app.load().cases if c.id == "draft-1")
    assert case.origin == ORIGIN_DRAFTED and case.question == "How long are backup archives kept?"
    assert "status" not in _records(app.golden)[-1]
    assert _records(app.drafts) == []


def test_edit_on_disk_is_not_overwritten(browser: Any, app: LabelApp) -> None:  # noqa: F811
    """A line added by hand while the page is open: the next save is refused, the hand
    edit kept; after a reload the save goes through."""
    _open(browser, app.url)
    by_hand = {"id": "by-hand", "question": "Typed in an editor?", "answerable": False}
    with app.golden.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(by_hand) + "\n")
    before = app.golden.read_bytes()
    _label(browser, "rotation.md", "Revoked tokens stop working", "When do revoked tokens stop?")
    _wait(
        browser, "return document.getElementById('error').textContent.includes('changed on disk')"
    )
    assert app.golden.read_bytes() == before
    _click(browser, "reload")
    _wait(browser, "return document.querySelector('#cases tr[data-id=\"by-hand\"]')")
    _click(browser, "save")
    _message(browser, "saved q-006")
    assert [r["id"] for r in _records(app.golden)][-2:] == ["by-hand", "q-006"]


def test_ten_cases_timed(browser: Any, app: LabelApp) -> None:  # noqa: F811
    """Ten cases labelled one after another, timed by this test's clock (docs/golden.md)."""
    _open(browser, app.url)
    before = len(app.load().cases)
    started = time.monotonic()
    for number in range(TIMED_CASES):
        _label(browser, "rotation.md", PASSAGE, f"Rotation question {number}?")
        _wait(browser, "return document.getElementById('message').textContent.startsWith('saved')")
        _wait(browser, "return document.getElementById('question').value === ''")
    seconds = time.monotonic() - started
    assert len(app.load().cases) == before + TIMED_CASES
    TIMING_FILE.parent.mkdir(parents=True, exist_ok=True)
    TIMING_FILE.write_text(json.dumps({"cases": TIMED_CASES, "seconds": round(seconds, 2)}) + "\n")
    print(f"labelled {TIMED_CASES} cases in {seconds:.2f} s", file=sys.stderr)
