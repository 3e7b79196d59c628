import { execFileSync } from "child_process";
import * as path from "path";
import { expect, test } from "@playwright/test";
import { installArguments, judgeProbe, parseProbe, PROBE_SCRIPT } from "../../src/probe";

const NOTHING = { commands: [], description: "" };

test.describe("the interpreter probe", () => {
  // the extension's folder, as the extension runs the probe: bundled/ holds exporter/versions.py
  const extension = path.resolve(__dirname, "..", "..");
  const repo = path.resolve(extension, "..");

  test("runs in a real Python and reports its version and missing modules", () => {
    const probe = parseProbe(execFileSync("python3", ["-c", PROBE_SCRIPT], { encoding: "utf8", cwd: extension }));
    expect(probe.version[0]).toBe(3);
    expect(probe.executable).toMatch(/python/);
    expect(probe.missing.every((name) => ["torch", "onnx", "onnxscript", "onnxruntime"].includes(name))).toBe(true);
  });

  test("installs the torch the project supports, as exporter/versions.py says, CPU wheels on Linux", () => {
    const recommended = execFileSync("python3", [path.join(repo, "exporter", "versions.py"), "recommended"], { encoding: "utf8" }).trim();
    const script = PROBE_SCRIPT.replace("missing = [", "missing = ['torch', 'onnxruntime'] or [");
    const probe = parseProbe(execFileSync("python3", ["-c", script], { encoding: "utf8", cwd: extension }));
    expect(probe.install).toEqual({
      commands: [
        ["install", `torch==${recommended}`, "--index-url", "https://download.pytorch.org/whl/cpu"],
        ["install", "onnxruntime", `torch==${recommended}`],
      ],
      description: `pip will install torch ${recommended} (CPU build, from https://download.pytorch.org/whl/cpu) and onnxruntime`,
    });
    expect(installArguments(probe.install)).toEqual([
      ["-m", "pip", "install", `torch==${recommended}`, "--index-url", "https://download.pytorch.org/whl/cpu"],
      ["-m", "pip", "install", "onnxruntime", `torch==${recommended}`],
    ]);
  });

  test("names the missing packages and says what it will install", () => {
    const install = { commands: [["install", "onnxruntime"]], description: "pip will install onnxruntime" };
    const verdict = judgeProbe({ version: [3, 11, 7], executable: "/usr/bin/python3", missing: ["onnxruntime"], install });
    expect(verdict).toEqual({
      kind: "missing",
      packages: ["onnxruntime"],
      install,
      message: "onnxlens cannot check models: onnxruntime is not installed in /usr/bin/python3. Install: pip will install onnxruntime.",
    });
  });

  test("refuses Python older than 3.10", () => {
    const verdict = judgeProbe({ version: [3, 8, 10], executable: "/usr/bin/python3.8", missing: [], install: NOTHING });
    expect(verdict.kind).toBe("too-old");
    expect(verdict.kind === "too-old" && verdict.message).toContain("Python 3.10 or newer; /usr/bin/python3.8 is 3.8.10");
  });

  test("is satisfied when everything is there", () => {
    expect(judgeProbe({ version: [3, 10, 0], executable: "python", missing: [], install: NOTHING })).toEqual({ kind: "ok" });
  });

  test("rejects an answer that is not the probe's", () => {
    expect(() => parseProbe('{"hello": 1}')).toThrow(/unexpected answer/);
  });
});
