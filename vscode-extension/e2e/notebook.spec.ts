/**
 * A Jupyter notebook in VS Code's notebook editor: the finding of the target in cell 6 is a
 * squiggle in that cell, a problem at the cell's line and the cell's CodeLens; rewriting the
 * branch and saving makes it go (the server checks the notebook's code cells as one module, docs/notebooks.md).
 */
import { expect, test } from "@playwright/test";
import * as path from "path";
import { vscodeSession } from "./session";
import { expectProblems, openFile, problems, screenshot } from "./workbench";

test.describe.configure({ mode: "serial" });

const session = vscodeSession(true, undefined, path.join(__dirname, "workspaces", "notebook"));

test("a notebook's finding is squiggled in its cell and goes after the fix", async () => {
  const { page } = session;
  await openFile(page, "export.ipynb");
  await expect(page.locator(".notebookOverlay")).toBeVisible({ timeout: 60_000 });
  await expectProblems(page, [["ONNX101", 4]]);
  // torch's first error is shown early, at the same place; the draft export's finding follows
  await expect
    .poll(async () => (await problems(page)).map((p) => p.text).join("\n"), {
      timeout: 150_000,
      intervals: [1000],
    })
    .toContain("depends on the values inside a tensor");
  // the problem reveals its cell; the squiggle is in the cell that holds `if x.sum() > 0:`,
  // and in no other one
  await page.locator(".markers-panel .monaco-list-row", { hasText: "ONNX101" }).first().dblclick();
  const cell = page.locator(".notebookOverlay .code-cell-row", { hasText: "class Branching" });
  await expect(cell.locator(".squiggly-error")).toHaveCount(1, { timeout: 30_000 });
  await expect(page.locator(".notebookOverlay .squiggly-error")).toHaveCount(1);
  await expect(cell.locator(".codelens-decoration", { hasText: "✗ ONNX · 1 problem" })).toBeVisible({
    timeout: 30_000,
  });
  // the pointer off the problem it double-clicked, whose tooltip would cover the panel
  await page.locator(".markers-panel").hover({ position: { x: 20, y: 200 } });
  await expect(page.locator(".workbench-hover:visible")).toHaveCount(0);
  await screenshot(page, "notebook");

  // the fix: from the branch's line to the end of the cell, one `torch.where`
  await expect(cell.locator(".monaco-editor.focused")).toBeVisible({ timeout: 10_000 });
  await page.keyboard.press("Home"); // to the `if`, after the indentation
  await page.keyboard.press("Control+Shift+End");
  // a closing bracket the editor added itself is typed over
  await page.keyboard.type("return torch.where(x.sum() > 0, x + 1, x - 1)");
  await expect(cell).toContainText("return torch.where(x.sum() > 0, x + 1, x - 1)");
  await page.keyboard.press("Control+S");
  await expect.poll(async () => (await problems(page)).length, { timeout: 150_000 }).toBe(0);
  await expect(page.locator(".notebookOverlay .squiggly-error")).toHaveCount(0);
  await expect(cell.locator(".codelens-decoration", { hasText: "✓ ONNX" })).toBeVisible(); // the re-check has ended
  await screenshot(page, "notebook-fixed");
});
