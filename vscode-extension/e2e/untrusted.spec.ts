/** The examples workspace, not trusted: no diagnostics, no worker; trusting it starts checks. */
import { expect, Page, test } from "@playwright/test";
import * as path from "path";
import { CodeServer, REPO, recordProcesses, startCodeServer, stillAlive, stopCodeServer } from "./codeServer";
import { expectProblems, openFile, openWorkbench, problems, runCommand, screenshot, statusItem } from "./workbench";

let server: CodeServer;
let page: Page;

test.beforeAll(async ({ browser }) => {
  server = await startCodeServer(path.join(REPO, "examples"));
  page = await browser.newPage();
  await openWorkbench(page, server.url, false);
});

test.afterAll(async () => {
  await page?.close();
  if (server) {
    await stopCodeServer(server);
    expect(stillAlive(server), "processes left behind by code-server").toEqual([]);
  }
});

test("an untrusted workspace runs no model code until it is trusted", async () => {
  await openFile(page, "failing/special_functions.py");
  await expect(statusItem(page)).toContainText("ONNX: restricted", { timeout: 120_000 });
  // The server is up (it answers CodeLens) but has started no worker.
  await expect(page.locator(".codelens-decoration", { hasText: "not checked (workspace not trusted)" }).first())
    .toBeVisible({ timeout: 120_000 });
  await page.waitForTimeout(5000);
  const commands = recordProcesses(server).map((p) => p.command);
  expect(commands.some((c) => c.includes("onnxlens_server.py"))).toBe(true);
  expect(commands.filter((c) => c.includes("worker_main"))).toEqual([]);
  expect(await problems(page)).toEqual([]);
  await screenshot(page, "untrusted");

  // Trusting the folder starts the checks without a reload.
  await runCommand(page, "Workspaces: Manage Workspace Trust");
  await page.getByRole("button", { name: /^Trust( Folder)?$/ }).first().click();
  await expectProblems(page, [["ONNX201", 14], ["ONNX101", 15], ["ONNX106", 15], ["ONNX201", 17]]);
  expect(recordProcesses(server).some((p) => p.command.includes("worker_main"))).toBe(true);
  await screenshot(page, "trusted-after-grant");
});
