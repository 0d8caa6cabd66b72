"""The MLflow UI as a user meets it after ``make sweep`` and ``make ui``, in a real browser.

The demo sweep (``ragsweep -m sweep=chunking``) runs into a fresh SQLite store; ``ragsweep ui``
(what ``make ui`` runs) prints the experiment's URL and serves MLflow's UI over the store;
headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by Selenium through
``/usr/bin/chromedriver``: Selenium Manager never downloads anything) opens that URL in a
fresh profile, as a first-time user would. Every step saves a screenshot to
``outputs/browser/`` for a reviewer (docs/tracking.md, "Comparing runs in the MLflow UI",
walks through the same pages).

What MLflow 3.17.2's UI does, found by reading its bundle and checked here:

- The page an experiment opens on follows the browser's workflow switch ("GenAI" / "Model
  training", kept in the browser's localStorage as ``mlflow.workflowType``, default GenAI),
  overridden by the URL's ``?workflowType=machine_learning``; the experiment tag
  ``mlflow.experimentKind`` (which ragsweep sets to ``custom_model_development``) is not
  consulted for that in 3.17.2. So ``ragsweep ui`` prints the URL with the parameter.
- The runs table is an ag-grid: one ``.ag-row[row-id=<run id>]`` per visible run; a parent's
  "Run Name" cell holds the button that expands its children; columns are
  ``[col-id="metrics.`<key>`"]``, ``[col-id="params.`<key>`"]``, chosen in the "Columns"
  menu (``[data-testid=column-selection-dropdown]``, with a "Search columns" box).
- A run's page shows the tag ``mlflow.note.content`` (Markdown) under "Description"; its
  "Artifacts" tab lists the files; a JSON table artifact (``mlflow.loggedArtifacts`` lists
  it as ``type: table``) opens with "View as table" ticked.
- The runs page's third view (``input[name=runs-view-mode][value=ARTIFACT]``, "Evaluation")
  puts the table artifacts of the shown runs side by side, one row per case.

Assertions about features of other parts of issue 13 (run descriptions, the per-case table
artifact) are separate functions (``assert_*``) so that they can follow those features.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient
from tests.ports import free_port

from ragsweep.core import tags as tag

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "outputs" / "browser"
RAGSWEEP = Path(sys.executable).parent / "ragsweep"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_PACKAGES = ("chromium", "chromium-driver")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1600,1000",
)
SWEEP = "chunking"
OBJECTIVE = "recall_at_2000c"
"""The demo sweep's objective (sweeps/chunking.yaml)."""
DESCRIPTION_TAG = "mlflow.note.content"
"""MLflow's run description tag, shown on the run page under "Description"."""
LOGGED_ARTIFACTS_TAG = "mlflow.loggedArtifacts"
CASES_TABLE = "cases_table.json"
"""The per-case MLflow table artifact of a run (issue 13)."""
UI_START_SECONDS = 240.0
"""``mlflow ui`` (one worker, ``ragsweep ui``'s default) may take a minute to answer on a
busy 2-core machine."""
SHOWN_WHOLE = 15
"""Characters of a child's name MLflow 3.17.2's default Run Name column shows uncut in
headless Chromium (about 98 pixels beside the swatch and the nesting indent): ``size=1200
#32e3`` fits, ``overlap=200 #32e3`` shows as ``overlap=200 #32…`` (docs/tracking.md)."""
WAIT_SECONDS = 60.0
"""How long a page may take to show what is asserted."""

pytestmark = pytest.mark.browser


def _missing(what: str) -> None:
    """Skip on a developer's machine without ``what``; in CI (``CI`` set) fail instead,
    so the test never skips silently where it is meant to run."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} (CI installs it: .ci/run)")
    pytest.skip(what)


# --- the browser --------------------------------------------------------------------------


def install_chromium() -> None:
    """Install Debian's Chromium and its driver when either is missing (as root, apt-get)."""
    if CHROMIUM.exists() and CHROMEDRIVER.exists():
        return
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        _missing(f"{CHROMIUM} or {CHROMEDRIVER} is missing and cannot be installed here")
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([apt, "update", "-qq"], check=True, env=env, timeout=600)
    subprocess.run(
        [apt, "install", "-y", "-qq", *CHROMIUM_PACKAGES], check=True, env=env, timeout=1200
    )


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Headless Chromium with a fresh profile (a first-time user), quit at the end."""
    install_chromium()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium is not installed (pip install -e '.[browser]')")
        raise
    options = webdriver.ChromeOptions()
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.binary_location = str(CHROMIUM)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


# --- the store and the UI -----------------------------------------------------------------


@dataclass
class Sweep:
    """The demo sweep as logged: the store, its experiment and its runs."""

    uri: str
    output_dir: Path
    experiment_id: str
    parent: Any
    children: list[Any]

    def client(self) -> MlflowClient:
        return MlflowClient(tracking_uri=self.uri)


def _store_overrides(root: Path) -> list[str]:
    return [f"tracking.uri=sqlite:///{root / 'mlflow.db'}", f"paths.output_dir={root / 'outputs'}"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    """``ragsweep -m sweep=chunking`` into a fresh store, as a subprocess (about 80 s)."""
    root = tmp_path_factory.mktemp("ui-store")
    done = subprocess.run(
        [
            str(RAGSWEEP),
            "-m",
            f"sweep={SWEEP}",
            *_store_overrides(root),
            f"hydra.sweep.dir={root / 'sweep'}",
        ],
        cwd=root,
        env={**os.environ, "MLFLOW_TRACKING_URI": ""},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("ragsweep")
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get(tag.SWEEP_ROLE) == "parent"]
    children = [r for r in runs if r.data.tags.get(tag.PARENT_RUN_ID) == parent.info.run_id]
    assert len(children) == len(runs) - 1 >= 2
    return Sweep(uri, root / "outputs", str(experiment.experiment_id), parent, children)


@dataclass
class Ui:
    """``ragsweep ui`` running over the sweep's store: the URL it printed, its base."""

    url: str
    base: str


def _printed_line(process: subprocess.Popen[str], seconds: float) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], seconds)
    return process.stdout.readline() if ready else ""


def _wait_until_serving(base: str, process: subprocess.Popen[str], log: Path) -> None:
    deadline = time.monotonic() + UI_START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"ragsweep ui exited ({process.returncode}): {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    pytest.fail(f"the MLflow UI did not answer within {UI_START_SECONDS:.0f} s")


def _stop(process: subprocess.Popen[str]) -> None:
    """Stop ``mlflow ui`` and its workers (its own process group)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
    if process.stdout is not None:
        process.stdout.close()


@pytest.fixture(scope="module")
def ui(sweep: Sweep, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ui]:
    """``ragsweep ui --port P`` over the sweep's store (what ``make ui`` runs), stopped at
    the end."""
    port = free_port()
    log = tmp_path_factory.mktemp("ui-log") / "mlflow-ui.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [str(RAGSWEEP), "ui", "--port", str(port), *_store_overrides(sweep.output_dir.parent)],
            cwd=sweep.output_dir.parent,
            env={**os.environ, "MLFLOW_TRACKING_URI": ""},
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,  # its own process group: the workers stop with it
        )
    try:
        line = _printed_line(process, 120.0)
        base = f"http://127.0.0.1:{port}"
        assert line.startswith("MLflow UI: "), (line, log.read_text()[-2000:])
        _wait_until_serving(base, process, log)
        yield Ui(line.removeprefix("MLflow UI: ").strip(), base)
    finally:
        _stop(process)


# --- page helpers -------------------------------------------------------------------------


def wait_for(driver: Any, found: Callable[[], Any], what: str) -> Any:
    """Poll ``found()`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + WAIT_SECONDS
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = found()
            if result:
                return result
        except Exception as exc:  # the page is still rendering
            last_error = exc
        time.sleep(0.5)
    screenshot(driver, f"failed-{re.sub(r'[^a-z0-9]+', '-', what.lower())[:60]}")
    pytest.fail(f"the UI did not show {what} within {WAIT_SECONDS:.0f} s ({last_error})")


def screenshot(driver: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def xpath(driver: Any, expression: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.XPATH, expression))


def click(driver: Any, element: Any) -> None:
    """Click ``element`` as a user would. An element under another one or hidden (React's
    radio inputs sit under their styled labels) gets a script click instead."""
    from selenium.common.exceptions import (
        ElementClickInterceptedException,
        ElementNotInteractableException,
    )

    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    try:
        element.click()
    except (ElementClickInterceptedException, ElementNotInteractableException):
        driver.execute_script("arguments[0].click()", element)


def close_assistant(driver: Any) -> None:
    """Close the "MLflow Assistant" side panel (open by default) to free the page."""
    for button in css(driver, "button[aria-label=Close]"):
        if button.is_displayed():
            click(driver, button)
            return


def shown_run_ids(driver: Any) -> set[str]:
    return {row.get_attribute("row-id") for row in css(driver, ".ag-row[row-id]")}


def run_row(driver: Any, run_id: str) -> list[Any]:
    return css(driver, f'.ag-row[row-id="{run_id}"]')


def run_link(driver: Any, run_id: str) -> Any:
    """The link on a run's name in the runs table (to the run's page)."""
    (link,) = css(driver, f'.ag-row[row-id="{run_id}"] [col-id="attributes.`Run Name`"] a')
    return link


def text_of(driver: Any) -> str:
    return str(driver.execute_script("return document.body.innerText"))


def open_runs_table(driver: Any, ui: Ui, sweep: Sweep) -> None:
    """Open the URL ``ragsweep ui`` printed and wait for the parent's row."""
    driver.get(ui.url)
    wait_for(driver, lambda: run_row(driver, sweep.parent.info.run_id), "the sweep parent's row")
    close_assistant(driver)
    (table_view,) = css(driver, "input[name=runs-view-mode][value=TABLE]")
    if not table_view.is_selected():  # the UI reopens the view a user left it in
        click(driver, table_view)


def expand(driver: Any, sweep: Sweep) -> None:
    """Click the expander in the parent's "Run Name" cell (the UI keeps it open for the
    next visit, so only when the children are folded); wait for every child's row."""
    parent = sweep.parent.info.run_id
    wanted = {parent} | {c.info.run_id for c in sweep.children}
    if not shown_run_ids(driver) >= wanted:
        (button,) = css(
            driver, f'.ag-row[row-id="{parent}"] [col-id="attributes.`Run Name`"] button'
        )
        click(driver, button)
    wait_for(driver, lambda: shown_run_ids(driver) >= wanted, "the parent's children")


def show_column(driver: Any, col_id: str, name: str) -> None:
    """Tick column ``name`` (``col_id`` in the table) in the "Columns" menu, found through
    its search box; the UI keeps the choice for the next visit, so only when not shown."""
    from selenium.webdriver.common.keys import Keys

    if css(driver, f'.ag-header-cell[col-id="{col_id}"]'):
        return
    menu = [m for m in css(driver, "[data-testid=column-selection-dropdown]") if m.is_displayed()]
    click(driver, menu[0])
    box = wait_for(
        driver, lambda: css(driver, 'input[placeholder="Search columns"]'), "Search columns"
    )
    box[0].clear()
    box[0].send_keys(name)
    title = f"//*[@role='dialog']//*[contains(@class, 'tree-title')][normalize-space(.)='{name}']"
    option = wait_for(driver, lambda: xpath(driver, title), f"the column {name} in Columns")
    click(driver, option[0])
    box[0].send_keys(Keys.ESCAPE)
    wait_for(driver, lambda: css(driver, f'.ag-header-cell[col-id="{col_id}"]'), f"column {name}")


def cell_text(driver: Any, run_id: str, col_id: str) -> str:
    cells = css(driver, f'.ag-row[row-id="{run_id}"] .ag-cell[col-id="{col_id}"]')
    return str(cells[0].text).strip() if cells else ""


def axis_param_key(axis: str, params: dict[str, str]) -> str:
    """The param a swept axis shows under: the axis itself (``chunking.size``), or for a
    config group (``preprocess``) the option's name param (``preprocess.name``) while
    params still hold the group's fields."""
    return axis if axis in params else f"{axis}.name"


def plain_markdown(text: str) -> str:
    """``text`` as the UI renders its Markdown, reduced to words (links to their text)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[*`#>|]", "", text)
    return " ".join(text.split())


# --- what a user sees ---------------------------------------------------------------------


def test_make_ui_prints_the_experiment_url(ui: Ui, sweep: Sweep) -> None:
    assert ui.url == f"{ui.base}/#/experiments/{sweep.experiment_id}?workflowType=machine_learning"
    experiment = sweep.client().get_experiment(sweep.experiment_id)
    assert experiment.tags[tag.EXPERIMENT_KIND] == tag.RUNS_TABLE_KIND


def test_the_experiment_opens_on_its_runs_table(browser: Any, ui: Ui, sweep: Sweep) -> None:
    open_runs_table(browser, ui, sweep)
    assert f"/#/experiments/{sweep.experiment_id}/runs" in browser.current_url
    page = text_of(browser)
    assert f"{1 + len(sweep.children)} matching runs" in page
    assert shown_run_ids(browser) == {sweep.parent.info.run_id}  # children folded under it
    assert sweep.parent.info.run_name in page
    screenshot(browser, "01-runs-table")


def test_the_parent_expands_to_its_children(browser: Any, ui: Ui, sweep: Sweep) -> None:
    open_runs_table(browser, ui, sweep)
    expand(browser, sweep)
    # the link's first line is the run's colour swatch (#a6630c), hidden from sight
    names = {run_link(browser, c.info.run_id).text.splitlines()[-1] for c in sweep.children}
    assert names == {c.info.run_name for c in sweep.children}, names
    short = [c for c in sweep.children if len(c.info.run_name) <= SHOWN_WHOLE]
    assert short, [c.info.run_name for c in sweep.children]  # overlap=0 #…, size=400 #…
    for child in short:  # the Run Name column shows these names uncut
        label = run_link(browser, child.info.run_id).find_element("css selector", "span")
        cut = browser.execute_script(
            "return arguments[0].scrollWidth > arguments[0].clientWidth", label
        )
        assert not cut, child.info.run_name
    screenshot(browser, "02-children")


def test_objective_and_axes_are_a_column_choice_away(browser: Any, ui: Ui, sweep: Sweep) -> None:
    open_runs_table(browser, ui, sweep)
    expand(browser, sweep)
    axes = sorted({c.data.tags[tag.AXIS] for c in sweep.children})
    keys = {axis: axis_param_key(axis, sweep.children[0].data.params) for axis in axes}
    objective_col = f"metrics.`{OBJECTIVE}`"
    show_column(browser, objective_col, OBJECTIVE)
    for key in keys.values():
        show_column(browser, f"params.`{key}`", key)
    for child in sweep.children:
        shown = cell_text(browser, child.info.run_id, objective_col)
        assert float(shown) == pytest.approx(child.data.metrics[OBJECTIVE], abs=1e-4), shown
        for key in keys.values():
            assert (
                cell_text(browser, child.info.run_id, f"params.`{key}`") == child.data.params[key]
            )
    screenshot(browser, "03-objective-and-axes")


def best_child(sweep: Sweep) -> Any:
    (best,) = [c for c in sweep.children if c.data.tags.get(tag.BEST) == "true"]
    return best


def open_run_page_from_table(browser: Any, ui: Ui, sweep: Sweep, run: Any) -> None:
    """Expand the parent and click ``run``'s name, as a user does."""
    open_runs_table(browser, ui, sweep)
    expand(browser, sweep)
    (link,) = css(
        browser, f'.ag-row[row-id="{run.info.run_id}"] [col-id="attributes.`Run Name`"] a'
    )
    click(browser, link)
    wait_for(browser, lambda: run.info.run_id in browser.current_url, "the run's page")
    wait_for(browser, lambda: "Description" in text_of(browser), "the run page's Description")
    close_assistant(browser)


def assert_description_shown(browser: Any, run: Any) -> None:
    """The run's description (tag ``mlflow.note.content``, Markdown) is on its page."""
    description = run.data.tags.get(DESCRIPTION_TAG, "")
    assert description, f"run {run.info.run_name} has no description ({DESCRIPTION_TAG})"
    wait_for(
        browser,
        lambda: plain_markdown(description.splitlines()[0]) in page_words(browser),
        "the description's first line",
    )
    for more in xpath(browser, "//button[normalize-space(.)='Show more']"):
        click(browser, more)  # a long description is folded below its first lines
    lines = [
        plain_markdown(re.sub(r"^\s*(?:[-*]|\d+\.)\s+", "", line))
        for line in description.splitlines()
    ]
    wait_for(
        browser,
        lambda: all(line in page_words(browser) for line in lines if line),
        "every line of the run's description",
    )


def page_words(browser: Any) -> str:
    """The page's text reduced to words, as :func:`plain_markdown` reduces Markdown."""
    return plain_markdown(text_of(browser))


def test_a_child_run_page_shows_its_description(browser: Any, ui: Ui, sweep: Sweep) -> None:
    run = best_child(sweep)
    open_run_page_from_table(browser, ui, sweep, run)
    screenshot(browser, "04-run-description")
    assert_description_shown(browser, run)


def cases_table(sweep: Sweep, run: Any, tmp_path: Path) -> dict[str, Any]:
    """The per-case table artifact of ``run``, logged as an MLflow table (``columns``,
    ``data``: one row per case)."""
    logged = json.loads(run.data.tags.get(LOGGED_ARTIFACTS_TAG, "[]"))
    assert {"path": CASES_TABLE, "type": "table"} in logged, (
        f"run {run.info.run_name} lists no table {CASES_TABLE} in {LOGGED_ARTIFACTS_TAG}"
    )
    path = sweep.client().download_artifacts(run.info.run_id, CASES_TABLE, str(tmp_path))
    table: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return table


def cases_table_columns(sweep: Sweep, run: Any, tmp_path: Path) -> list[str]:
    return [str(c) for c in cases_table(sweep, run, tmp_path)["columns"]]


def assert_cases_table_shown(browser: Any, columns: list[str]) -> None:
    """``cases_table.json`` opened in the run's Artifacts tab renders as a table with the
    artifact's columns (``question`` among them)."""
    assert "question" in columns
    (entry,) = wait_for(
        browser,
        lambda: xpath(browser, f"//*[normalize-space(text())='{CASES_TABLE}']"),
        f"{CASES_TABLE} in the artifact list",
    )
    click(browser, entry)
    wait_for(browser, lambda: "View as table" in text_of(browser), "View as table")

    def headers() -> list[str]:
        return [h.text.strip() for h in css(browser, "th, [role=columnheader]") if h.text.strip()]

    wait_for(browser, lambda: set(columns[:3]) <= set(headers()), "the table's columns")


def test_the_per_case_table_shows_in_the_run_artifacts(
    browser: Any, ui: Ui, sweep: Sweep, tmp_path: Path
) -> None:
    run = best_child(sweep)
    open_run_page_from_table(browser, ui, sweep, run)
    (tab,) = (
        xpath(browser, "//*[@role='tab' and normalize-space(.)='Artifacts']")
        or xpath(browser, "//*[normalize-space(text())='Artifacts']")[:1]
    )
    click(browser, tab)
    wait_for(browser, lambda: "config.yaml" in text_of(browser), "the artifact list")
    screenshot(browser, "05-artifacts")
    columns = cases_table_columns(sweep, run, tmp_path)
    assert_cases_table_shown(browser, columns)
    screenshot(browser, "05-cases-table")


def assert_cases_compared(browser: Any, table: dict[str, Any]) -> None:
    """The runs page's evaluation view offers ``cases_table.json`` and lists its cases, one
    row per value of the table's first column (the view groups by it)."""
    wait_for(browser, lambda: CASES_TABLE in text_of(browser), f"Table: {CASES_TABLE}")
    first_cases = [str(row[0]) for row in table["data"][:3]]
    wait_for(
        browser,
        lambda: all(case in text_of(browser) for case in first_cases),
        f"the cases {first_cases}",
    )


def test_the_evaluation_view_compares_runs_case_by_case(
    browser: Any, ui: Ui, sweep: Sweep, tmp_path: Path
) -> None:
    table = cases_table(sweep, best_child(sweep), tmp_path)
    open_runs_table(browser, ui, sweep)
    expand(browser, sweep)
    (mode,) = css(browser, "input[name=runs-view-mode][value=ARTIFACT]")
    click(browser, mode)
    assert_cases_compared(browser, table)
    screenshot(browser, "06-evaluation-view")


def select_runs(browser: Any, runs: list[Any]) -> None:
    """Tick the row checkbox of each of ``runs`` in the runs table."""
    for run in runs:
        (box,) = css(browser, f'.ag-row[row-id="{run.info.run_id}"] .ag-selection-checkbox input')
        if not box.is_selected():
            click(browser, box)
    wait_for(
        browser,
        lambda: all(
            "ag-row-selected" in (row.get_attribute("class") or "")
            for run in runs
            for row in run_row(browser, run.info.run_id)
        ),
        "the ticked runs",
    )


def open_compare_view(browser: Any, runs: list[Any]) -> list[str]:
    """Click *Compare* above the runs table (``runs`` ticked) and wait for MLflow's compare
    page; the run ids of its columns, left to right."""
    (button,) = wait_for(
        browser,
        lambda: [
            b for b in xpath(browser, "//button[normalize-space(.)='Compare']") if b.is_enabled()
        ],
        "the Compare button",
    )
    click(browser, button)
    wait_for(
        browser,
        lambda: f"Comparing {len(runs)} Runs from 1 Experiment" in text_of(browser),
        f"Comparing {len(runs)} Runs",
    )
    close_assistant(browser)
    header = "table.mlflow-compare-run-table thead th.data-value a"
    ids: list[str] = wait_for(
        browser, lambda: [a.text.strip() for a in css(browser, header)], "the Run ID row"
    )
    return ids


def compare_section(browser: Any, title: str) -> Any:
    """The content of the compare page's section ``title`` (``Parameters``, ``Metrics``),
    found by its *Show diff only* switch."""
    (switch,) = css(browser, f'button[aria-label="{title} - Show diff only"]')
    return browser.execute_script(
        "return arguments[0].closest('.du-bois-light-collapse-content-box')", switch
    )


def compared_params(browser: Any) -> dict[str, list[str]]:
    """The rows of the compare page's parameter table: param → value per column."""
    rows: dict[str, list[str]] = {}
    for tr in css(compare_section(browser, "Parameters"), "tbody tr"):
        name, *values = [cell.text.strip() for cell in css(tr, "th, td")]
        rows[name] = values
    return rows


def show_diff_only(browser: Any, title: str) -> None:
    (switch,) = css(browser, f'button[aria-label="{title} - Show diff only"]')
    if switch.get_attribute("aria-checked") != "true":
        click(browser, switch)
    wait_for(browser, lambda: switch.get_attribute("aria-checked") == "true", "Show diff only")


GRID_CELLS = """
return Array.from(arguments[0].querySelectorAll(
  '.ReactVirtualized__Grid__innerScrollContainer > div'
)).map(c => [c.innerText.trim(), parseFloat(c.style.top), parseFloat(c.style.left)]);
"""
"""The rendered cells of a virtualized grid: text, row offset, column offset (pixels)."""


@dataclass
class MetricTable:
    """The compare page's metric table as read: metric → value per column, and how many
    pixels the name column stood above the values once scrolled to the end."""

    rows: dict[str, list[str]]
    names_lag: float


def compared_metrics(browser: Any) -> MetricTable:
    """The rows of the compare page's metric table. The table is two virtualized grids in a
    300-pixel box (names, values) that render only the rows in sight, so it is read while
    scrolling down with the mouse wheel, as a user reads it; each name is matched to the
    values of its row by the row's offset in the grid, not by where it is drawn."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin

    names_grid, values_grid = css(compare_section(browser, "Metrics"), ".ReactVirtualized__Grid")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", values_grid)
    rows: dict[str, list[str]] = {}
    offset = -1.0

    def scrolled(grid: Any) -> float:
        return float(browser.execute_script("return arguments[0].scrollTop", grid))

    while True:
        names = {top: text for text, top, _ in browser.execute_script(GRID_CELLS, names_grid)}
        values: dict[float, list[tuple[float, str]]] = {}
        for text, top, left in browser.execute_script(GRID_CELLS, values_grid):
            values.setdefault(top, []).append((left, text))
        for top, name in names.items():
            if top in values:
                rows[name] = [text for _, text in sorted(values[top])]
        previous, offset = offset, scrolled(values_grid)
        if offset == previous:
            return MetricTable(rows, offset - scrolled(names_grid))
        wheel = ScrollOrigin.from_element(values_grid)
        ActionChains(browser).scroll_from_origin(wheel, 0, 200).perform()
        time.sleep(0.3)


def assert_compare_view(
    browser: Any, siblings: list[Any], columns: list[str], axes: list[str]
) -> None:
    """What docs/tracking.md ("Comparing runs", step 5) says the compare page shows for
    sibling children: their names; a parameter table of the result-affecting params, in
    which *Show diff only* leaves the axis they were launched for, with their values; the
    metric table with the headline set only (no per-type, cache or table figures), the
    objective and its interval among them, each value as logged; and, after scrolling, the
    metric names out of line with their values."""
    by_id = {run.info.run_id: run for run in siblings}
    assert sorted(columns) == sorted(by_id), columns
    ordered = [by_id[run_id] for run_id in columns]
    page = text_of(browser)
    assert all(run.info.run_name in page for run in ordered)

    params = compared_params(browser)
    for key in (axis_param_key(a, ordered[0].data.params) for a in axes):  # every axis
        assert params[key] == [run.data.params[key] for run in ordered], (key, params[key])
    assert not [k for k in params if k.startswith(("paths.", "tracking.", "cache."))], params
    show_diff_only(browser, "Parameters")
    axis = axis_param_key(ordered[0].data.tags[tag.AXIS], ordered[0].data.params)
    wait_for(browser, lambda: list(compared_params(browser)) == [axis], f"only {axis} differs")
    assert compared_params(browser)[axis] == [run.data.params[axis] for run in ordered]
    screenshot(browser, "09-compare-params")

    table = compared_metrics(browser)
    metrics = table.rows
    assert set(metrics) == set(ordered[0].data.metrics), sorted(metrics)
    assert not [m for m in metrics if m.startswith(("by_type/", "cache/", "n_cases/"))]
    low, high = f"{OBJECTIVE}_ci_low", f"{OBJECTIVE}_ci_high"
    for name in (OBJECTIVE, low, high, f"by_type_min/{OBJECTIVE}", "mrr", "recall_at_5"):
        shown = [float(value) for value in metrics[name]]
        logged = [run.data.metrics[name] for run in ordered]
        assert shown == pytest.approx(logged, abs=6e-4), (name, shown, logged)
    screenshot(browser, "09-compare-metrics")
    # MLflow 3.17.2: the name column follows the values one wheel step late, so after
    # scrolling the names stand beside other rows' values (docs/tracking.md says so)
    assert table.names_lag > 0, "the metric names no longer lag: update docs/tracking.md"


def test_the_compare_view_shows_the_axes_and_the_headline_metrics(
    browser: Any, ui: Ui, sweep: Sweep
) -> None:
    """Tick the children of the sweep's first axis, click *Compare*."""
    first_axis = [c for c in sweep.children if c.data.tags[tag.AXIS_INDEX] == "1"]
    assert len(first_axis) >= 2
    open_runs_table(browser, ui, sweep)
    expand(browser, sweep)
    select_runs(browser, first_axis)
    screenshot(browser, "09-compare-selected")
    columns = open_compare_view(browser, first_axis)
    screenshot(browser, "09-compare")
    axes = sorted({c.data.tags[tag.AXIS] for c in sweep.children})
    assert_compare_view(browser, first_axis, columns, axes)


def test_after_choosing_model_training_the_plain_url_opens_on_the_runs_table(
    browser: Any, ui: Ui, sweep: Sweep
) -> None:
    """Without the URL's parameter, MLflow 3.17.2 opens an experiment on the page of the
    browser's workflow switch: GenAI's overview for a first-time user, the runs table once
    the user chose "Model training" (kept by the browser). Last here: it flips the switch."""
    plain = f"{ui.base}/#/experiments/{sweep.experiment_id}"
    browser.get(plain)
    wait_for(browser, lambda: "/overview" in browser.current_url, "the GenAI overview")
    screenshot(browser, "07-plain-url-first-visit")
    (switch,) = xpath(browser, "//*[normalize-space(text())='Model training']")
    click(browser, switch)
    wait_for(browser, lambda: "/runs" in browser.current_url, "the runs table")
    browser.get(f"{ui.base}/#/experiments")
    browser.get(plain)
    wait_for(browser, lambda: run_row(browser, sweep.parent.info.run_id), "the parent's row")
    assert "/runs" in browser.current_url
    screenshot(browser, "08-plain-url-after-model-training")
