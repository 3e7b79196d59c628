/**
 * An interpreter without torch & co.: the user is told which packages are missing and offered
 * to install them; the status item says the worker is down.
 */
import { execFileSync } from "child_process";
import { expect, Page, test } from "@playwright/test";
import * as path from "path";
import { CodeServer, REPO, startCodeServer, stillAlive, stopCodeServer } from "./codeServer";
import { openFile, openWorkbench, screenshot, statusItem } from "./workbench";

let server: CodeServer;
let page: Page;
let bare: string;

test.beforeAll(async ({ browser }) => {
  server = await startCodeServer(path.join(REPO, "examples"), {}, (home) => {
    bare = path.join(home, "bare");
    execFileSync("python3", ["-m", "venv", "--without-pip", bare]);
    return { "onnxlens.interpreter": path.join(bare, "bin", "python") };
  });
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

test("missing export packages are named, with an action that installs them", async () => {
  await openFile(page, "mlp.py");
  const toast = page.locator(".notification-toast", { hasText: "onnxlens cannot check models: torch, onnx, onnxscript, onnxruntime are not installed" });
  await expect(toast).toBeVisible({ timeout: 120_000 });
  await expect(toast).toContainText(path.join(bare, "bin", "python"));
  await expect(toast.getByRole("button", { name: "Install torch, onnx, onnxscript, onnxruntime" })).toBeVisible();
  await expect(statusItem(page)).toContainText("ONNX: worker down");
  await screenshot(page, "missing-packages");
});
