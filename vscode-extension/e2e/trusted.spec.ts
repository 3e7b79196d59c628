/**
 * The examples workspace, trusted, in a real VS Code: Problems, hover, Run in ONNX Runtime from
 * the CodeLens, and a quick fix that makes its diagnostic go.
 */
import { expect, test } from "@playwright/test";
import { existsSync, readFileSync, rmSync } from "fs";
import { languageServerPid, recordProcesses, updateWorkspaceSettings } from "./codeServer";
import { vscodeSession } from "./session";
import {
  chooseAction,
  clearNotifications,
  codeLens,
  expectProblems,
  expectStatus,
  goToLine,
  openFile,
  problems,
  runCommand,
  screenshot,
  token,
  webviewFrame,
} from "./workbench";

test.describe.configure({ mode: "serial" });

const session = vscodeSession(true);

test("a failing model's problems are listed at their lines", async () => {
  const { page, server } = session;
  await openFile(page, "failing/special_functions.py");
  const found = await expectProblems(page, [["ONNX201", 14], ["ONNX101", 15], ["ONNX201", 17]]);
  expect(found.find((p) => p.line === 14)?.text).toContain("`aten::i0` has no ONNX translation");
  await expect(page.locator(".monaco-editor .squiggly-error").first()).toBeVisible();
  await expectStatus(page, "ONNX: 3 problems");
  const processes = recordProcesses(server).map((p) => p.command);
  expect(processes.some((c) => c.includes("onnxlens_server.py"))).toBe(true);
  expect(processes.some((c) => c.includes("export_worker.process"))).toBe(true);
  await expect(codeLens(page, "✗ ONNX · 3 problems")).toBeVisible(); // the check has ended
  await clearNotifications(page);
  await screenshot(page, "problems");
});

test("the rule id in the Problems panel opens the rule's page bundled with the extension", async () => {
  const { page } = session;
  await openFile(page, "failing/special_functions.py");
  await expectProblems(page, [["ONNX201", 14], ["ONNX101", 15], ["ONNX201", 17]]);
  const row = page.locator(".markers-panel .monaco-list-row", { hasText: "ONNX101" }).first();
  await row.getByRole("button", { name: "(ONNX101)" }).click();
  await expect(page.locator(".editor-group-container .tab.active", { hasText: "ONNX101.md" })).toBeVisible({
    timeout: 30_000,
  });
  await expect(page.locator(".monaco-editor .view-lines").first()).toContainText("# ONNX101:");
  await screenshot(page, "rule-page");
  await page.keyboard.press("Control+W");
});

test("hovering a target shows its summary", async () => {
  const { page } = session;
  await openFile(page, "mlp.py");
  await expect(codeLens(page, /✓ ONNX/)).toBeVisible({ timeout: 120_000 });
  await clearNotifications(page);
  await token(page, /class\sMLPModel/, "MLPModel").hover();
  const hover = page.locator(".monaco-hover:visible").first();
  await expect(hover).toContainText("ONNX export: MLPModel — ✓ exports");
  await expect(hover).toContainText("tensor_input");
  await expect(hover).toContainText("Stages:");
  await expect(hover).toHaveCSS("opacity", "1"); // its fade-in has ended
  await screenshot(page, "hover");
  await page.keyboard.press("Escape");
});

test("Run from the CodeLens shows the ONNX Runtime result", async () => {
  const { page } = session;
  await openFile(page, "mlp.py");
  await expect(codeLens(page, /✓ ONNX/)).toBeVisible({ timeout: 120_000 });
  await clearNotifications(page);
  await codeLens(page, /^Run$/).click();
  const view = await webviewFrame(page, "#verdict");
  await expect(view.locator("h1")).toHaveText("MLPModel in ONNX Runtime");
  await expect(view.locator("#verdict")).toHaveText("✓ ONNX Runtime matches PyTorch");
  await expect(view.locator("body")).toContainText("output");
  await expect(view.locator("#latency")).toContainText(/p50 [\d.]+ ms · p90 [\d.]+ ms/);
  await screenshot(page, "run-in-ort");
  await runCommand(page, "View: Close All Editor Groups");
});

test("the CodeLens title opens the export report", async () => {
  const { page } = session;
  await openFile(page, "mlp.py");
  await clearNotifications(page);
  await codeLens(page, /✓ ONNX/).click();
  const preview = await webviewFrame(page, "text=ONNX export: MLPModel");
  await expect(preview.locator("body")).toContainText("Operators: Gemm ×5");
  await expect(preview.locator("body")).toContainText("Stages: ✓ load");
  await screenshot(page, "report");
  await runCommand(page, "View: Close All Editor Groups");
});

test("Save from the CodeLens asks for a path, defaulting beside the source", async () => {
  const { page, server } = session;
  await openFile(page, "mlp.py");
  await expect(codeLens(page, /✓ ONNX/)).toBeVisible({ timeout: 120_000 });
  await clearNotifications(page);
  await codeLens(page, /^Save$/).click();
  const input = page.locator(".quick-input-widget input");
  await expect(input).toHaveValue(/\/MLPModel\.onnx$/);
  await screenshot(page, "save-dialog");
  await input.press("Enter");
  await expect(page.locator(".notification-toast", { hasText: "onnxlens: saved MLPModel to MLPModel.onnx." }))
    .toBeVisible({ timeout: 120_000 });
  expect(existsSync(`${server.workspace}/MLPModel.onnx`)).toBe(true);
  // the later tests' screenshots show the workspace as the examples are
  rmSync(`${server.workspace}/MLPModel.onnx`);
  await expect(page.locator(".explorer-folders-view .monaco-list-row", { hasText: "MLPModel.onnx" })).toHaveCount(0);
});

test("a quick fix makes its diagnostic go", async () => {
  const { page } = session;
  await openFile(page, "failing/fixed_batch.py");
  await expect
    .poll(async () => (await problems(page)).map((p) => `${p.rule}:${p.line}`), { timeout: 150_000, intervals: [1000] })
    .toContain("ONNX102:9");
  // the verdict first; the finding is published again, with the fix, once its trial ended
  await expect
    .poll(async () => (await problems(page)).map((p) => p.text).join(" "), { timeout: 150_000, intervals: [1000] })
    .toContain("Tried and works: Make");
  await clearNotifications(page);
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
  await expect(codeLens(page, /^✓ ONNX/)).toBeVisible({ timeout: 150_000 }); // the re-check has ended
  await screenshot(page, "quick-fix-applied");
});

test("a settings change applies in the running server, without a restart", async () => {
  const { page, server } = session;
  await openFile(page, "failing/special_functions.py");
  await expectProblems(page, [["ONNX201", 14], ["ONNX101", 15], ["ONNX201", 17]]);
  const before = languageServerPid(server);
  expect(before).toBeDefined();
  updateWorkspaceSettings(server, { "onnxlens.ignore": ["ONNX101"] });
  await expectProblems(page, [["ONNX201", 14], ["ONNX201", 17]]);
  expect(languageServerPid(server)).toBe(before); // the server, and its warm torch worker, stayed
  await expectStatus(page, "ONNX: 2 problems");
  await expect(codeLens(page, "✗ ONNX · 2 problems")).toBeVisible(); // counts what is shown
  await screenshot(page, "settings-applied");
});

test("Restart language server starts a new server that checks again", async () => {
  const { page, server } = session;
  const before = languageServerPid(server);
  await runCommand(page, "onnxlens: Restart language server");
  await expect.poll(() => languageServerPid(server), { timeout: 60_000 }).not.toBe(before);
  await expect.poll(() => languageServerPid(server), { timeout: 60_000 }).toBeDefined();
  // the previous test's setting (ignore ONNX101) still applies
  await expectProblems(page, [["ONNX201", 14], ["ONNX201", 17]]);
  await screenshot(page, "restart-server");
});

test("Write SARIF log writes the workspace's problems as SARIF", async () => {
  const { page, server } = session;
  await runCommand(page, "onnxlens: Write SARIF log");
  const sarif = `${server.workspace}/onnxlens.sarif`;
  const toast = page.locator(".notification-toast", { hasText: `onnxlens: wrote ${sarif}` });
  await expect(toast).toBeVisible();
  await expect(toast.getByRole("button", { name: "Open" })).toBeVisible();
  await screenshot(page, "sarif-written");
  expect(existsSync(sarif)).toBe(true);
  const log = JSON.parse(readFileSync(sarif, "utf8")) as { version: string; runs: Array<{ results: Array<{ ruleId: string }> }> };
  expect(log.version).toBe("2.1.0");
  expect(log.runs[0].results.map((r) => r.ruleId).sort()).toEqual(["ONNX201", "ONNX201"]);
  rmSync(sarif);
  await clearNotifications(page);
});

test("the quick fix 'Ignore ONNX401 on this line' silences the finding there", async () => {
  const { page } = session;
  await openFile(page, "failing/double_precision.py");
  await expect
    .poll(async () => (await problems(page)).map((p) => `${p.rule}:${p.line}`), { timeout: 150_000, intervals: [1000] })
    .toContain("ONNX401:10");
  await goToLine(page, 10, 35);
  await page.keyboard.press("Control+.");
  await chooseAction(page, /Ignore ONNX401 on this line/);
  await page.keyboard.press("Control+S");
  await expect
    .poll(async () => (await problems(page)).map((p) => `${p.rule}:${p.line}`), { timeout: 150_000, intervals: [1000] })
    .not.toContain("ONNX401:10");
  await expect(page.locator(".monaco-editor .view-lines").first()).toContainText("# onnxlens: ignore[ONNX401]");
  await screenshot(page, "ignore-quick-fix");
});
