/**
 * Several slow failing models opened one after another, one check at a time: the file in
 * front of the user is checked before the ones opened earlier that still wait.
 *
 * Which file takes the one place first is up to the server (the one in front of the user
 * when the queue is first read), so the test makes it slow_a's and waits until its check
 * runs before it opens the rest: then slow_b, slow_c and slow_d wait, and slow_d, the
 * active one, must go next.
 */
import { expect, test } from "@playwright/test";
import * as path from "path";
import { vscodeSession } from "./session";
import { codeLens, openFile, problems, runCommand, screenshot } from "./workbench";

test.describe.configure({ mode: "serial" });

const session = vscodeSession(true, undefined, path.join(__dirname, "workspaces", "queue"), {
  "onnxlens.maxConcurrentChecks": 1,
});

/** The files the Problems panel lists, in its order, read in one pass. */
async function filesWithProblems(page: import("@playwright/test").Page): Promise<string[]> {
  await problems(page); // opens the panel
  const texts = await page.locator(".markers-panel .monaco-list-row").allInnerTexts();
  return texts.map((text) => /slow_[a-d]\.py/.exec(text)?.[0]).filter((name): name is string => !!name);
}

test("opening several failing models shows the active one's squiggles first", async () => {
  const { page } = session;
  await openFile(page, "slow_a.py");
  await expect(codeLens(page, /ONNX · checking/)).toBeVisible({ timeout: 60_000 });
  for (const name of ["slow_b.py", "slow_c.py", "slow_d.py"]) {
    await openFile(page, name);
  }
  // slow_a still holds the place (its check takes over eight seconds); slow_d is next
  await expect(codeLens(page, /ONNX · queued \(#1\)/)).toBeVisible({ timeout: 5_000 });
  const seen: string[] = [];
  await expect
    .poll(async () => {
      for (const name of await filesWithProblems(page)) {
        if (!seen.includes(name)) {
          seen.push(name);
        }
      }
      return seen.length;
    }, { timeout: 150_000, intervals: [250] })
    .toBe(4);
  expect(seen.indexOf("slow_d.py")).toBeLessThan(seen.indexOf("slow_b.py"));
  expect(seen.indexOf("slow_d.py")).toBeLessThan(seen.indexOf("slow_c.py"));
  await expect(page.locator(".monaco-editor .squiggly-error").first()).toBeVisible();
  await screenshot(page, "active-first");
  await runCommand(page, "View: Close All Editors");
});
