/**
 * The examples workspace, trusted, in a real VS Code: Problems, hover, Run in ONNX Runtime from
 * the CodeLens, and a quick fix that makes its diagnostic go.
 */
import { expect, Page, test } from "@playwright/test";
import * as path from "path";
import { CodeServer, REPO, recordProcesses, startCodeServer, stillAlive, stopCodeServer } from "./codeServer";
import {
  chooseAction,
  codeLens,
  expectProblems,
  goToLine,
  openFile,
  openWorkbench,
  problems,
  screenshot,
  statusItem,
  token,
  webviewFrame,
} from "./workbench";

test.describe.configure({ mode: "serial" });

let server: CodeServer;
let page: Page;

test.beforeAll(async ({ browser }) => {
  server = await startCodeServer(path.join(REPO, "examples"));
  page = await browser.newPage();
  await openWorkbench(page, server.url, true);
});

test.afterAll(async () => {
  await page?.close();
  if (server) {
    await stopCodeServer(server);
    expect(stillAlive(server), "processes left behind by code-server").toEqual([]);
  }
});

test("a failing model's problems are listed at their lines", async () => {
  await openFile(page, "failing/special_functions.py");
  const found = await expectProblems(page, [["ONNX201", 14], ["ONNX101", 15], ["ONNX106", 15], ["ONNX201", 17]]);
  expect(found.find((p) => p.line === 14)?.text).toContain("`aten::i0` has no ONNX translation");
  await expect(page.locator(".monaco-editor .squiggly-error").first()).toBeVisible();
  await expect(statusItem(page)).toContainText("ONNX: 4 problems");
  const processes = recordProcesses(server).map((p) => p.command);
  expect(processes.some((c) => c.includes("onnxlens_server.py"))).toBe(true);
  expect(processes.some((c) => c.includes("lsp_server.worker_main"))).toBe(true);
  await screenshot(page, "problems");
});

test("hovering a target shows its summary", async () => {
  await openFile(page, "mlp.py");
  await expect(codeLens(page, /✓ ONNX/)).toBeVisible({ timeout: 120_000 });
  await token(page, /class\sMLPModel/, "MLPModel").hover();
  const hover = page.locator(".monaco-hover:visible").first();
  await expect(hover).toContainText("ONNX export: MLPModel — ✓ exports");
  await expect(hover).toContainText("tensor_input");
  await expect(hover).toContainText("Stages:");
  await screenshot(page, "hover");
  await page.keyboard.press("Escape");
});

test("Run from the CodeLens shows the ONNX Runtime result", async () => {
  await openFile(page, "mlp.py");
  await expect(codeLens(page, /✓ ONNX/)).toBeVisible({ timeout: 120_000 });
  await codeLens(page, /^Run$/).click();
  const view = await webviewFrame(page, "#verdict");
  await expect(view.locator("h1")).toHaveText("MLPModel in ONNX Runtime");
  await expect(view.locator("#verdict")).toHaveText("✓ ONNX Runtime matches PyTorch");
  await expect(view.locator("body")).toContainText("output");
  await expect(view.locator("#latency")).toContainText(/p50 [\d.]+ ms · p90 [\d.]+ ms/);
  await screenshot(page, "run-in-ort");
});

test("a quick fix makes its diagnostic go", async () => {
  await openFile(page, "failing/fixed_batch.py");
  await expect
    .poll(async () => (await problems(page)).map((p) => `${p.rule}:${p.line}`), { timeout: 150_000, intervals: [1000] })
    .toContain("ONNX102:9");
  await goToLine(page, 9, 20);
  await page.keyboard.press("Control+.");
  const fix = page.locator(".action-widget .monaco-list-row", { hasText: /Make .* static/ }).first();
  await expect(fix).toBeVisible();
  await screenshot(page, "quick-fix");
  await chooseAction(page, /Make .* static/);
  await page.keyboard.press("Control+S");
  await expect
    .poll(async () => (await problems(page)).map((p) => p.rule), { timeout: 150_000, intervals: [1000] })
    .not.toContain("ONNX102");
  await expect(page.locator(".monaco-editor .view-lines").first()).toContainText("dynamic_shapes");
  await screenshot(page, "quick-fix-applied");
});
