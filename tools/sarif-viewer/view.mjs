// Render SARIF logs in Microsoft's SARIF viewer component, in Debian's Chromium, and print
// what a person sees as JSON (tests/onnxlens/test_sarif_viewer.py reads it):
//
//   node tools/sarif-viewer/view.mjs [--screenshot FILE.png] LOG.sarif...
//
// The page (page.html + entry.js, bundled here with esbuild into a temporary directory) is
// loaded from a file:// URL; each log is read here and handed to the page, and every request
// that is not for a file of the page is refused (and reported). One browser renders every
// log, each on a page of its own: first as the viewer opens it (only the first rule's group
// expanded; --screenshot takes the first log's page then), then with every rule's group
// expanded by a click on its chevron, as a person would. Nothing waits on a clock: each step
// waits for the DOM it needs.
//
// ONNXLENS_CHROMIUM: the Chromium to drive (default /usr/bin/chromium).
import { mkdtempSync, readFileSync, rmSync, copyFileSync, mkdirSync } from "fs";
import { tmpdir } from "os";
import path from "path";
import { fileURLToPath, pathToFileURL } from "url";
import esbuild from "esbuild";
import { chromium } from "playwright-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
  "--no-first-run"];

function parseArgs(argv) {
  const logs = [];
  let screenshot = null;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--screenshot") screenshot = argv[++i];
    else logs.push(argv[i]);
  }
  if (!logs.length || screenshot === undefined) {
    console.error("usage: node view.mjs [--screenshot FILE.png] LOG.sarif...");
    process.exit(2);
  }
  return { logs, screenshot };
}

async function buildPage(dir) {
  await esbuild.build({
    entryPoints: [path.join(here, "entry.js")], bundle: true, minify: true,
    outfile: path.join(dir, "viewer.js"), logLevel: "error",
    define: { "process.env.NODE_ENV": '"production"' },
  });
  copyFileSync(path.join(here, "page.html"), path.join(dir, "page.html"));
  return pathToFileURL(path.join(dir, "page.html")).href;
}

/** What the viewer shows, read from its DOM: the run, the rules' rows, the results' rows. */
function readView() {
  const text = (node) => (node ? node.textContent : null);
  const visible = (node) => {
    if (!node) return false;
    const box = node.getBoundingClientRect();
    return box.width > 0 && box.height > 0 && getComputedStyle(node).visibility !== "hidden";
  };
  const rules = [];
  const results = [];
  let rule = null;
  for (const row of document.querySelectorAll("tr.bolt-tree-row")) {
    if (row.getAttribute("aria-level") === "1") {
      // the rule's id: a link to its page (helpUri), else plain text before the name
      const link = row.querySelector(".swcRowRule a");
      rule = link ? text(link) : row.querySelector(".swcRowRule").innerText.split(":")[0].trim();
      rules.push({
        id: rule, href: link ? link.getAttribute("href") : null,
        text: row.querySelector(".swcRowRule").innerText,
        count: text(row.querySelector(".swcRowRule .bolt-pill")),
        expanded: row.getAttribute("aria-expanded") === "true",
      });
      continue;
    }
    const cell = row.querySelector('td[data-column-index="0"]');
    const logical = cell.querySelector("pre code");
    // the path cell's two lines: the logical location, then the file
    const pathNode = cell.querySelectorAll(".bolt-table-two-line-cell-item")[1] || null;
    const details = row.querySelector('td[data-column-index="1"]');
    const message = details.querySelector(".swcMarkDown") || details.querySelector("span");
    const snippet = details.querySelector("pre.swcSnippet");
    const code = snippet && snippet.querySelector("code.hljs");
    const numbers = snippet && snippet.querySelector("code.lineNumber");
    // clipped: the column cuts the text off on the right (a tooltip shows the rest)
    const clipped = (node) => node !== null
      && node.getBoundingClientRect().right > cell.getBoundingClientRect().right + 0.5;
    results.push({
      rule,
      level: text(cell.querySelector("svg desc")),
      logicalLocation: text(logical),
      logicalLocationVisible: visible(logical),
      logicalLocationClipped: clipped(logical),
      path: text(pathNode),
      pathHref: pathNode && pathNode.querySelector("a")
        ? pathNode.querySelector("a").getAttribute("href") : null,
      message: message ? message.innerText : null,
      messageLinks: message ? [...message.querySelectorAll("a")].map((a) => a.getAttribute("href"))
        : [],
      lineNumbers: numbers ? numbers.textContent.split("\n").filter((n) => n) : [],
      code: code ? code.textContent : null,
      codeVisible: visible(code),
      // the viewer cuts a snippet of more than about 7 lines off (a click shows it all)
      snippetClipped: snippet ? snippet.classList.contains("clipped") : false,
      highlighted: code ? [...code.querySelectorAll(".swcRegion")].map((n) => n.textContent) : [],
      highlightVisible: code ? [...code.querySelectorAll(".swcRegion")].every(visible) : false,
      highlightBackground: code && code.querySelector(".swcRegion")
        ? getComputedStyle(code.querySelector(".swcRegion")).backgroundColor : null,
    });
  }
  const title = document.querySelector(".swcRunTitle");
  return { title: title ? title.innerText.replace(/\s+/g, " ").trim() : null, rules, results,
           text: document.body.innerText };
}

async function view(context, url, logPath, screenshot) {
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (error) => errors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  await page.goto(url);
  const log = JSON.parse(readFileSync(logPath, "utf8"));
  await page.evaluate((sarif) => window.renderSarif(sarif), log);
  await page.waitForSelector(".swcRowRule");
  // the first rule's group opens: its results' rows, each with its message and snippet (the
  // snippet is highlighted as it is rendered, in the same commit)
  await page.waitForSelector('tr.bolt-tree-row[aria-level="2"] td[data-column-index="1"]');
  const opened = await page.evaluate(readView);
  if (screenshot) {
    mkdirSync(path.dirname(path.resolve(screenshot)), { recursive: true });
    const card = await page.locator(".bolt-card").boundingBox();
    const size = page.viewportSize();
    await page.screenshot({ path: screenshot,
      clip: { x: 0, y: 0, width: size.width,
              height: Math.min(size.height, Math.ceil(card.y + card.height + 24)) } });
  }
  // a click on each closed group's chevron, until every result's row is there
  const results = log.runs.reduce((n, run) => n + (run.results || []).length, 0);
  const closedRows = 'tr.bolt-tree-row[aria-level="1"][aria-expanded="false"]';
  const closed = page.locator(closedRows);
  for (let left = await closed.count(); left > 0; left--) {
    await closed.first().locator(".bolt-tree-expand-button").click();
    await page.waitForFunction(([selector, n]) => document.querySelectorAll(selector).length < n,
      [closedRows, left]);
  }
  await page.waitForFunction((n) => document.querySelectorAll(
    'tr.bolt-tree-row[aria-level="2"]').length === n, results);
  const expanded = await page.evaluate(readView);
  await page.close();
  return { log: logPath, opened, expanded, errors };
}

const { logs, screenshot } = parseArgs(process.argv.slice(2));
const dir = mkdtempSync(path.join(tmpdir(), "onnxlens-sarif-viewer-"));
let browser = null;
try {
  const url = await buildPage(dir);
  browser = await chromium.launch({
    executablePath: process.env.ONNXLENS_CHROMIUM ?? "/usr/bin/chromium", args: CHROMIUM_ARGS });
  const context = await browser.newContext({ viewport: { width: 1600, height: 900 } });
  const refused = [];
  await context.route("**/*", (route) => {
    const requested = route.request().url();
    if (requested.startsWith(pathToFileURL(dir).href + "/")) return route.continue();
    refused.push(requested);
    return route.abort();
  });
  const views = [];
  for (const [index, logPath] of logs.entries()) {
    views.push(await view(context, url, logPath, index === 0 ? screenshot : null));
  }
  process.stdout.write(JSON.stringify({ views, refused }) + "\n");
} finally {
  if (browser) await browser.close();
  rmSync(dir, { recursive: true, force: true });
}
