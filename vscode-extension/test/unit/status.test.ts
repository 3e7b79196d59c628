import { expect, test } from "@playwright/test";
import { MANAGE_TRUST, SHOW_OUTPUT, SHOW_PROBLEMS, StatusInputs, statusView } from "../../src/status";

const idle: StatusInputs = { server: "running", trusted: true, workerState: "ready", checking: 0, problems: 0, missing: [] };

test.describe("statusView", () => {
  test("is a check mark when idle with no problems", () => {
    expect(statusView(idle)).toMatchObject({ text: "$(check) ONNX", command: SHOW_PROBLEMS });
  });

  test("spins while a file is checked and opens the output", () => {
    const view = statusView({ ...idle, checking: 2 });
    expect(view.text).toBe("$(sync~spin) ONNX: checking");
    expect(view.tooltip).toContain("checking 2 files");
    expect(view.command).toBe(SHOW_OUTPUT);
  });

  test("counts problems and opens the Problems panel", () => {
    expect(statusView({ ...idle, problems: 1 })).toMatchObject({ text: "$(error) ONNX: 1 problem", command: SHOW_PROBLEMS });
    expect(statusView({ ...idle, problems: 7 }).text).toBe("$(error) ONNX: 7 problems");
  });

  test("says the worker is down, with what is missing", () => {
    const view = statusView({ ...idle, workerState: "missing", missing: ["torch", "onnxruntime"] });
    expect(view.text).toBe("$(warning) ONNX: worker down");
    expect(view.tooltip).toContain("torch, onnxruntime missing");
    expect(view.background).toBe("statusBarItem.warningBackground");
    expect(statusView({ ...idle, workerState: "down" }).text).toBe("$(warning) ONNX: worker down");
  });

  test("shows restricted mode before anything else about the worker", () => {
    const view = statusView({ ...idle, trusted: false, workerState: "stopped", problems: 3 });
    expect(view).toMatchObject({ text: "$(shield) ONNX: restricted", command: MANAGE_TRUST });
  });

  test("shows a stopped server in red, clicking to the output", () => {
    expect(statusView({ ...idle, server: "failed" })).toMatchObject({
      text: "$(error) ONNX: server stopped", command: SHOW_OUTPUT, background: "statusBarItem.errorBackground",
    });
  });

  test("checking wins over the problem count of the previous check", () => {
    expect(statusView({ ...idle, checking: 1, problems: 4 }).text).toBe("$(sync~spin) ONNX: checking");
  });
});
