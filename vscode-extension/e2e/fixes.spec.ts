/**
 * A failure inside a library's code, where the user cannot edit a line: the export of a Swin
 * backbone fails in transformers' modeling code. onnxlens tries the fixes that apply (docs/fixes.md),
 * and the one that works, `attn_implementation="eager"` on the user's config call, becomes a
 * quick fix; applied and saved, the re-check is clean.
 */
import { expect, test } from "@playwright/test";
import * as path from "path";
import { REPO } from "./codeServer";
import { vscodeSession } from "./session";
import { chooseAction, codeLens, expectProblems, goToLine, openFile, problems, screenshot } from "./workbench";

test.describe.configure({ mode: "serial" });

// the model of tests/onnxlens/test_fixes.py (the workspace is a copy)
const session = vscodeSession(true, undefined, path.join(REPO, "tests", "onnxlens", "fixes"));

test("a fix onnxlens tried for a library failure is a quick fix that makes the failure go", async () => {
  const { page } = session;
  await openFile(page, "swin_attention.py");
  const [found] = await expectProblems(page, [["ONNX202", 10]]);
  expect(found.text).toContain("Decomposing the graph for ONNX failed");
  // the verdict first; the finding is published again once the trials end
  await expect
    .poll(async () => (await problems(page)).map((p) => p.text).join(" "), { timeout: 240_000, intervals: [1000] })
    .toContain('Tried and works: Build the model with `attn_implementation="eager"`');
  await goToLine(page, 10, 5);
  await page.keyboard.press("Control+.");
  const fix = page.locator(".action-widget .monaco-list-row", { hasText: /attn_implementation="eager"/ }).first();
  await expect(fix).toBeVisible();
  await screenshot(page, "library-fix");
  await chooseAction(page, /attn_implementation="eager"/);
  await expect(page.locator(".monaco-editor .view-lines").first()).toContainText('attn_implementation="eager",');
  await page.keyboard.press("Control+S");
  await expect.poll(async () => (await problems(page)).length, { timeout: 240_000, intervals: [1000] }).toBe(0);
  await expect(codeLens(page, /^✓ ONNX/)).toBeVisible({ timeout: 240_000 }); // the re-check has ended
  await screenshot(page, "library-fix-applied");
});
