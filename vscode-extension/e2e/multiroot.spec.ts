/**
 * A multi-root workspace in a real VS Code: each folder's model is checked with that folder's
 * settings. `alpha` lowers ONNX101 to a warning in its own `.vscode/settings.json` (a
 * folder-scoped editor setting, asked for with the folder's `scopeUri`); `beta`'s
 * `pyproject.toml` ignores ONNX101. Both hold the same model (files of different names, so
 * that Quick Open cannot take one for the other), whose data-dependent branch is ONNX101 (an
 * error by default) on line 7.
 */
import { expect, test } from "@playwright/test";
import * as path from "path";
import { vscodeSession } from "./session";
import { codeLens, expectProblems, openFile, screenshot } from "./workbench";

test.describe.configure({ mode: "serial" });

const session = vscodeSession(true, undefined, path.join(__dirname, "workspaces", "multiroot"), {},
  "multiroot.code-workspace");

test("each folder of a multi-root workspace is checked with its own settings", async () => {
  const { page } = session;
  await openFile(page, "alpha_model.py");
  // alpha's own setting: ONNX101 shown, as a warning, so the target has no error
  await expectProblems(page, [["ONNX101", 7]]);
  const row = page.locator(".markers-panel .monaco-list-row", { hasText: "ONNX101" }).first();
  await expect(row.locator(".codicon-warning")).toHaveCount(1);
  await expect(codeLens(page, /✓ ONNX/)).toBeVisible({ timeout: 120_000 });
  await screenshot(page, "multiroot-alpha");

  await openFile(page, "beta_model.py");
  // beta's pyproject.toml ignores ONNX101: its check ends without a problem (an error there
  // would read "✗ ONNX · 1 problem"), and the Problems panel still lists alpha's alone
  await expect(codeLens(page, /✓ ONNX/)).toBeVisible({ timeout: 120_000 });
  await expect(page.locator(".breadcrumbs-control", { hasText: "beta_model.py" }).first()).toBeVisible();
  await expectProblems(page, [["ONNX101", 7]]);
  const rows = await page.locator(".markers-panel .monaco-list-row").allInnerTexts();
  expect(rows.some((text) => text.includes("beta_model.py"))).toBe(false);
  await screenshot(page, "multiroot-beta");
});
