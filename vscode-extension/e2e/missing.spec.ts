/**
 * An interpreter without torch & co.: the user is told which packages are missing and offered
 * to install them; the status item says the worker is down.
 */
import { execFileSync } from "child_process";
import { expect, test } from "@playwright/test";
import * as path from "path";
import { vscodeSession } from "./session";
import { expectStatus, openFile, screenshot } from "./workbench";

let bare = "";
const session = vscodeSession(true, (home) => {
  bare = path.join(home, "bare");
  execFileSync("python3", ["-m", "venv", "--without-pip", bare]);
  return { "onnxlens.interpreter": path.join(bare, "bin", "python") };
});

test("missing export packages are named, with an action that installs them", async () => {
  const { page } = session;
  await openFile(page, "mlp.py");
  const toast = page.locator(".notification-toast", { hasText: "onnxlens cannot check models: torch, onnx, onnxscript, onnxruntime are not installed" });
  await expect(toast).toBeVisible({ timeout: 120_000 });
  await expect(toast).toContainText(path.join(bare, "bin", "python"));
  await expect(toast.getByRole("button", { name: "Install torch, onnx, onnxscript, onnxruntime" })).toBeVisible();
  await expectStatus(page, "ONNX: worker down");
  await screenshot(page, "missing-packages");
});
