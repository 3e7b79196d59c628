/**
 * Runtimes you deploy to (issue 43; docs/runtimes.md): a model checked on OpenVINO and judged
 * for NNAPI shows, at its own lines, the node OpenVINO cannot convert and the nodes NNAPI would
 * leave to the CPU; the hover tells each runtime's verdict; the graph colours each node by
 * where it runs.
 */
import { expect, test } from "@playwright/test";
import * as path from "path";
import { vscodeSession } from "./session";
import { clearNotifications, codeLens, expectProblems, openFile, openGraph, screenshot, token } from "./workbench";

test.describe.configure({ mode: "serial" });

const session = vscodeSession(true, undefined, path.join(__dirname, "workspaces", "runtimes"));

test("a node a runtime cannot take is marked at its line, a fallen-back one as a warning", async () => {
  const { page } = session;
  await openFile(page, "volumes.py");
  const found = await expectProblems(page, [["ONNX705", 7], ["ONNX701", 8], ["ONNX705", 8]]);
  expect(found.find((p) => p.rule === "ONNX701")?.text).toContain(
    "OpenVINO (CPU) cannot convert ONNX node `n0` (Det)");
  expect(found.find((p) => p.rule === "ONNX705" && p.line === 7)?.text).toContain(
    "not on NNAPI, `node_sum_1` (ReduceSum: operator not in its table)");
  await expect(page.locator(".monaco-editor .squiggly-error").first()).toBeVisible();
  await expect(page.locator(".monaco-editor .squiggly-warning").first()).toBeVisible();
  await expect(codeLens(page, /✗ ONNX/)).toBeVisible(); // the check has ended
  await clearNotifications(page);
  await screenshot(page, "runtime-fallback");
});

test("the hover lists each runtime's verdict", async () => {
  const { page } = session;
  await openFile(page, "volumes.py");
  await token(page, /class\sVolumes/, "Volumes").hover();
  const hover = page.locator(".monaco-hover:visible").first();
  await expect(hover).toContainText("openvino-cpu");
  await expect(hover).toContainText("fails");
  await expect(hover).toContainText("falls back");
  await expect(hover).toHaveCSS("opacity", "1");
  await screenshot(page, "runtime-hover");
  await page.keyboard.press("Escape");
});

test("the graph colours each node by where it runs, the node OpenVINO cannot convert selected", async () => {
  const { page } = session;
  await openFile(page, "volumes.py");
  await expect(codeLens(page, /✗ ONNX/)).toBeVisible({ timeout: 300_000 });
  const { panel, viewer } = await openGraph(page);
  await expect(panel.locator("#status")).toContainText("selected Det n0", { timeout: 120_000 });
  await expect(viewer.locator("canvas").first()).toBeVisible({ timeout: 120_000 });
  const info = viewer.locator("body");
  await expect(info).toContainText(/op name\s+Det/, { timeout: 60_000 });
  await expect(info).toContainText("openvino-cpu ✗ · nnapi → CPU"); // the runtimes layer
  await page.waitForTimeout(1000); // the graph's first frame drawn
  await screenshot(page, "runtime-graph");
});
