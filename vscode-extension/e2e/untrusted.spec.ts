/** The examples workspace, not trusted: no diagnostics, no worker; trusting it starts checks. */
import { expect, test } from "@playwright/test";
import { recordProcesses } from "./codeServer";
import { vscodeSession } from "./session";
import {
  clearNotifications,
  codeLens,
  expectProblems,
  expectStatus,
  openFile,
  problems,
  runCommand,
  screenshot,
} from "./workbench";

const session = vscodeSession(false);

test("an untrusted workspace runs no model code until it is trusted", async () => {
  const { page, server } = session;
  await openFile(page, "failing/special_functions.py");
  await expectStatus(page, "ONNX: restricted", 120_000);
  // The server is up (it answers CodeLens) but has started no worker.
  await expect(page.locator(".codelens-decoration", { hasText: "not checked (workspace not trusted)" }).first())
    .toBeVisible({ timeout: 120_000 });
  await page.waitForTimeout(5000);
  const commands = recordProcesses(server).map((p) => p.command);
  expect(commands.some((c) => c.includes("onnxlens_server.py"))).toBe(true);
  expect(commands.filter((c) => c.includes("export_worker.process"))).toEqual([]);
  expect(await problems(page)).toEqual([]);
  await screenshot(page, "untrusted");

  // Trusting the folder starts the checks without a reload.
  await runCommand(page, "Workspaces: Manage Workspace Trust");
  await page.getByRole("button", { name: /^Trust( Folder)?$/ }).first().click();
  await expectProblems(page, [["ONNX201", 14], ["ONNX101", 15], ["ONNX201", 17]]);
  expect(recordProcesses(server).some((p) => p.command.includes("export_worker.process"))).toBe(true);
  // the file in front of the Workspace Trust editor, its check ended
  await openFile(page, "failing/special_functions.py");
  await expect(codeLens(page, "✗ ONNX · 3 problems")).toBeVisible();
  await clearNotifications(page);
  await screenshot(page, "trusted-after-grant");
});
