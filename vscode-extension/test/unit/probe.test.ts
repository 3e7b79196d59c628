import { execFileSync } from "child_process";
import { expect, test } from "@playwright/test";
import { installArguments, judgeProbe, parseProbe, PROBE_SCRIPT } from "../../src/probe";

test.describe("the interpreter probe", () => {
  test("runs in a real Python and reports its version and missing modules", () => {
    const probe = parseProbe(execFileSync("python3", ["-c", PROBE_SCRIPT], { encoding: "utf8" }));
    expect(probe.version[0]).toBe(3);
    expect(probe.executable).toMatch(/python/);
    expect(probe.missing.every((name) => ["torch", "onnx", "onnxscript", "onnxruntime"].includes(name))).toBe(true);
  });

  test("names the missing packages and offers to install exactly those", () => {
    const verdict = judgeProbe({ version: [3, 11, 7], executable: "/usr/bin/python3", missing: ["torch", "onnxruntime"] });
    expect(verdict).toEqual({
      kind: "missing",
      packages: ["torch", "onnxruntime"],
      message: "onnxlens cannot check models: torch, onnxruntime are not installed in /usr/bin/python3.",
    });
    expect(installArguments(["torch", "onnxruntime"])).toEqual(["-m", "pip", "install", "torch", "onnxruntime"]);
  });

  test("refuses Python older than 3.10", () => {
    const verdict = judgeProbe({ version: [3, 8, 10], executable: "/usr/bin/python3.8", missing: [] });
    expect(verdict.kind).toBe("too-old");
    expect(verdict.kind === "too-old" && verdict.message).toContain("Python 3.10 or newer; /usr/bin/python3.8 is 3.8.10");
  });

  test("is satisfied when everything is there", () => {
    expect(judgeProbe({ version: [3, 10, 0], executable: "python", missing: [] })).toEqual({ kind: "ok" });
  });

  test("rejects an answer that is not the probe's", () => {
    expect(() => parseProbe('{"hello": 1}')).toThrow(/unexpected answer/);
  });
});
