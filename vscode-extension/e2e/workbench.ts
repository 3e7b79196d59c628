/** Driving the VS Code workbench in the browser: trust, files, Problems, hovers, CodeLens. */
import { expect, Frame, Locator, Page } from "@playwright/test";
import { mkdirSync } from "fs";
import * as path from "path";

export const SCREENSHOTS = process.env.ONNXLENS_SCREENSHOTS ?? path.join(__dirname, "screenshots");

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`) });
}

/** Dismiss every notification, so that none left by an earlier step shows in a screenshot. */
export async function clearNotifications(page: Page): Promise<void> {
  await runCommand(page, "Notifications: Clear All Notifications");
  await expect(page.locator(".notification-toast:visible")).toHaveCount(0);
}

/** Load the workbench and answer the Workspace Trust dialog. */
export async function openWorkbench(page: Page, url: string, trust: boolean): Promise<void> {
  await page.goto(url);
  await expect(page.locator(".monaco-workbench")).toBeVisible({ timeout: 120_000 });
  const answer = trust ? "Yes, I trust the authors" : "No, I don't trust the authors";
  const button = page.locator(".monaco-dialog-box").getByRole("button", { name: answer });
  await button.click({ timeout: 60_000 });
  await expect(page.locator(".monaco-dialog-box")).toHaveCount(0);
}

/**
 * Wait until onnxlens's language status item says `text`. It lives in the `{}` entry beside the
 * language mode, whose accessible label lists every language status item's text and detail.
 */
export async function expectStatus(page: Page, text: string, timeout = 30_000): Promise<void> {
  const escaped = text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  await expect(page.locator('[id="status.languageStatus"]')).toHaveAttribute("aria-label", new RegExp(escaped), { timeout });
}

export async function runCommand(page: Page, title: string): Promise<void> {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await expect(input).toBeVisible();
  await input.fill(`>${title}`);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first().click();
}

/** Open a workspace file by its path relative to the workspace, with Quick Open. */
export async function openFile(page: Page, relative: string): Promise<void> {
  const name = path.basename(relative);
  const tab = page.locator(".editor-group-container.active .tab.active", { hasText: name });
  for (let attempt = 1; ; attempt++) {
    await page.keyboard.press("Control+P");
    const input = page.locator(".quick-input-widget input");
    await expect(input).toBeVisible();
    await input.fill(relative);
    const row = page.locator(".quick-input-list .monaco-list-row.focused", { hasText: name });
    await expect(row).toBeVisible();
    await input.press("Enter");
    try {
      await expect(tab).toBeVisible({ timeout: 10_000 });
      break;
    } catch (error) {
      await screenshot(page, `open-file-failed-${attempt}`);
      if (attempt === 3) {
        throw error;
      }
      await page.keyboard.press("Escape");
    }
  }
  await expect(page.locator(".monaco-editor .view-lines").first()).toBeVisible();
}

export interface Problem {
  rule: string;
  line: number;
  text: string;
}

/** Open the Problems panel and read its onnxlens rows: rule id and line of each. */
export async function problems(page: Page): Promise<Problem[]> {
  const panel = page.locator(".markers-panel");
  if (!(await panel.isVisible())) {
    await runCommand(page, "Problems: Focus on Problems View");
    await expect(panel).toBeVisible();
  }
  // All rows' texts in one read: the list re-renders while a check publishes, and a row
  // read one by one can be gone by the time it is read.
  const texts = await panel.locator(".monaco-list-row").allInnerTexts();
  const found: Problem[] = [];
  for (const raw of texts) {
    const text = raw.replace(/\s+/g, " ");
    const match = /onnxlens\s*\(?(ONNX\d{3})\)?.*?\[Ln (\d+), Col \d+\]/.exec(text);
    if (match) {
      found.push({ rule: match[1], line: Number(match[2]), text });
    }
  }
  return found;
}

/** Wait until the Problems panel lists exactly these (rule, line) pairs, in any order. */
export async function expectProblems(page: Page, expected: Array<[string, number]>): Promise<Problem[]> {
  const key = (rule: string, line: number) => `${rule}:${line}`;
  const wanted = expected.map(([rule, line]) => key(rule, line)).sort();
  let last: Problem[] = [];
  await expect
    .poll(async () => {
      last = await problems(page);
      return last.map((p) => key(p.rule, p.line)).sort();
    }, { timeout: 150_000, intervals: [1000] })
    .toEqual(wanted);
  return last;
}

/** A token on a line of the active editor, to hover or click. */
export function token(page: Page, lineText: RegExp, word: string): Locator {
  return page
    .locator(".monaco-editor .view-line", { hasText: lineText })
    .first()
    .locator("span > span", { hasText: new RegExp(`^${word}$`) })
    .first();
}

/** Put the cursor at a 1-based line and column of the active editor (Go to Line). */
export async function goToLine(page: Page, line: number, column: number): Promise<void> {
  await page.keyboard.press("Control+G");
  const input = page.locator(".quick-input-widget input");
  await expect(input).toBeVisible();
  await input.fill(`:${line}:${column}`);
  await input.press("Enter");
  await expect(page.locator(".statusbar-item", { hasText: `Ln ${line}, Col ${column}` })).toBeVisible();
}

/** Choose an entry of the open quick-fix menu with the keyboard (the menu blocks clicks). */
export async function chooseAction(page: Page, title: RegExp): Promise<void> {
  const focused = page.locator(".action-widget .monaco-list-row.focused");
  for (let step = 0; step < 12; step++) {
    if (title.test((await focused.innerText().catch(() => "")) ?? "")) {
      await page.keyboard.press("Enter");
      return;
    }
    await page.keyboard.press("ArrowDown");
  }
  throw new Error(`no quick fix matching ${title}`);
}

export function codeLens(page: Page, title: string | RegExp): Locator {
  return page.locator(".codelens-decoration a", { hasText: title }).first();
}

/** The frame of the webview whose document has an element matching `selector`. */
export async function webviewFrame(page: Page, selector: string): Promise<Frame> {
  let found: Frame | undefined;
  await expect
    .poll(async () => {
      for (const frame of page.frames()) {
        if (frame === page.mainFrame()) {
          continue;
        }
        try {
          if ((await frame.locator(selector).count()) > 0) {
            found = frame;
            return true;
          }
        } catch {
          // the frame navigated away meanwhile
        }
      }
      return false;
    }, { timeout: 120_000, intervals: [500] })
    .toBe(true);
  return found as Frame;
}

/** Hides the panel and the side bar (room for the graph beside the code), then opens the
 * graph with the "Graph" CodeLens: the panel's page (graphPanel.ts) and, inside it, Model
 * Explorer's frame, served by the language server on a loopback port. */
export async function openGraph(page: Page): Promise<{ panel: Frame; viewer: Frame }> {
  await page.locator(".monaco-editor .view-lines").first().click();
  await page.keyboard.press("Control+J"); // the panel
  await expect(page.locator(".markers-panel")).toBeHidden();
  await page.keyboard.press("Control+B"); // the side bar
  await expect(page.locator(".part.sidebar")).toBeHidden();
  await codeLens(page, /^Graph$/).click();
  const panel = await webviewFrame(page, "iframe#viewer");
  let viewer: Frame | undefined;
  await expect
    .poll(() => {
      viewer = panel.childFrames().find((frame) => /^http:\/\/127\.0\.0\.1:\d+\/\?data=/.test(frame.url()));
      return viewer !== undefined;
    }, { timeout: 120_000 })
    .toBe(true);
  return { panel, viewer: viewer as Frame };
}
