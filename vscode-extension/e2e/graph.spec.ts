/**
 * The graph view (issue 29): the "Graph" CodeLens on a failing model opens the checked graph
 * in Model Explorer beside the editor, the failing node selected; "Show in Graph" selects the
 * node a line produced; a click on a node in the graph moves the editor to its line.
 *
 * The frames: the workbench → VS Code's webview → the panel's page (graphPanel.ts) → Model
 * Explorer, served by the language server on a loopback port.
 */
import { expect, Frame, test } from "@playwright/test";
import * as path from "path";
import { recordProcesses, REPO } from "./codeServer";
import { vscodeSession } from "./session";
import { expectProblems, goToLine, openFile, openGraph, runCommand, screenshot } from "./workbench";

test.describe.configure({ mode: "serial" });

// examples/failing: double_precision.py's Erf has no float64 kernel in ONNX Runtime (ONNX401)
const session = vscodeSession(true, undefined, path.join(REPO, "examples", "failing"), {
  "onnxlens.fixBudgetSeconds": 0,
});

/** The node Model Explorer's side panel shows as selected ("NODE INFO": op name, id). */
function nodeInfo(viewer: Frame) {
  return viewer.locator("body");
}

test("the Graph CodeLens opens the checked graph on the failing node; lines and nodes lead to each other", async () => {
  const { page, server } = session;
  await openFile(page, "double_precision.py");
  await expectProblems(page, [["ONNX401", 10]]);
  const { panel, viewer } = await openGraph(page);
  await expect(panel.locator("#status")).toContainText("selected Erf n0 (the failing node)", { timeout: 120_000 });
  const canvas = viewer.locator("canvas").first();
  await expect(canvas).toBeVisible({ timeout: 120_000 });
  await expect(nodeInfo(viewer)).toContainText(/op name\s+Erf/, { timeout: 60_000 });
  await expect(nodeInfo(viewer)).toContainText(/\bid\s+n0\b/);
  await expect(nodeInfo(viewer)).toContainText("ONNX401"); // onnxlens's label on the node
  // the viewer is the language server's child, on the loopback only
  expect(recordProcesses(server).some((p) => p.command.includes("export_worker.viewer_launcher"))).toBe(true);
  await page.waitForTimeout(1000); // the graph's first frame drawn
  await screenshot(page, "graph-panel");

  // source → graph: line 9 (`x64 = x.double()`) made the first Cast
  await goToLine(page, 9, 9);
  await runCommand(page, "onnxlens: Show in Graph");
  await expect(nodeInfo(viewer)).toContainText(/op name\s+Cast/);
  await expect(nodeInfo(viewer)).toContainText(/\bid\s+node__to_copy\b/);
  await screenshot(page, "graph-show-in-graph");

  // graph → source: Model Explorer centres the node it selected; a click on it moves the
  // editor from line 1 to the node's line
  await goToLine(page, 1, 1);
  const box = await canvas.boundingBox();
  expect(box).not.toBeNull();
  await canvas.click({ position: { x: box!.width / 2, y: box!.height / 2 } });
  await expect(page.locator(".statusbar-item", { hasText: /Ln 9, Col \d+/ })).toBeVisible({ timeout: 30_000 });
  await expect(page.locator(".monaco-editor .view-line", { hasText: "x64 = x.double()" }).first()).toBeVisible();
  await page.waitForTimeout(500);
  await screenshot(page, "graph-to-source");
});
