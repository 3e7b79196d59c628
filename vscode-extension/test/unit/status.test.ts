import { expect, test } from "@playwright/test";
import { MANAGE_TRUST, ProblemCount, SHOW_OUTPUT, SHOW_PROBLEMS, StatusInputs, statusView } from "../../src/status";

const idle: StatusInputs = { server: "running", trusted: true, workerState: "ready", checking: 0, problems: 0, missing: [] };

test.describe("statusView", () => {
  test("says there are no problems when idle, linking to the Problems panel", () => {
    expect(statusView(idle)).toMatchObject({ text: "ONNX: no problems", severity: "information", busy: false,
      command: { command: SHOW_PROBLEMS } });
  });

  test("is busy while a file is checked and links to the output", () => {
    const view = statusView({ ...idle, checking: 2 });
    expect(view).toMatchObject({ text: "ONNX: checking", busy: true, command: { command: SHOW_OUTPUT } });
    expect(view.detail).toBe("checking 2 files");
    expect(statusView({ ...idle, workerState: "starting" }).detail).toBe("starting the export worker");
  });

  test("counts problems and links to the Problems panel", () => {
    expect(statusView({ ...idle, problems: 1 })).toMatchObject({ text: "ONNX: 1 problem", command: { command: SHOW_PROBLEMS } });
    expect(statusView({ ...idle, problems: 7 }).text).toBe("ONNX: 7 problems");
  });

  test("says the worker is down, with what is missing, as a warning", () => {
    const view = statusView({ ...idle, workerState: "missing", missing: ["torch", "onnxruntime"] });
    expect(view).toMatchObject({ text: "ONNX: worker down", severity: "warning" });
    expect(view.detail).toContain("torch, onnxruntime missing");
    expect(statusView({ ...idle, workerState: "down" }).detail).toContain("the export worker is down");
  });

  test("shows restricted mode before anything else about the worker", () => {
    const view = statusView({ ...idle, trusted: false, workerState: "stopped", problems: 3 });
    expect(view).toMatchObject({ text: "ONNX: restricted", command: { command: MANAGE_TRUST } });
  });

  test("shows a stopped server as an error, linking to the output", () => {
    for (const server of ["failed", "stopped"] as const) {
      expect(statusView({ ...idle, server })).toMatchObject({
        text: "ONNX: server stopped", severity: "error", command: { command: SHOW_OUTPUT },
      });
    }
    expect(statusView({ ...idle, server: "starting" })).toMatchObject({ text: "ONNX: starting", busy: true });
  });

  test("checking wins over the problem count of the previous check", () => {
    expect(statusView({ ...idle, checking: 1, problems: 4 }).text).toBe("ONNX: checking");
  });
});

test.describe("ProblemCount", () => {
  test("sums per document and replaces a document's count when it changes", () => {
    const count = new ProblemCount();
    expect(count.set("file:///a.py", 3)).toBe(3);
    expect(count.set("file:///b.py", 2)).toBe(5);
    expect(count.set("file:///a.py", 1)).toBe(3);
    expect(count.set("file:///b.py", 0)).toBe(1);
    expect(count.set("file:///c.py", 0)).toBe(1);
    expect(count.total).toBe(1);
  });
});
