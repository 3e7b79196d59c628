import { expect, test } from "@playwright/test";
import { chooseInterpreter, describeChoice, expandPath } from "../../src/interpreter";

const base = { setting: "", pythonExtension: undefined, trusted: true, workspaceFolder: "/ws", home: "/home/u" };

test.describe("chooseInterpreter", () => {
  test("prefers the onnxlens.interpreter setting over the Python extension", () => {
    const choice = chooseInterpreter({ ...base, setting: "/opt/py/bin/python", pythonExtension: "/ws/.venv/bin/python" });
    expect(choice).toEqual({ command: "/opt/py/bin/python", source: "setting" });
  });

  test("uses the Python extension's environment when no setting is given", () => {
    const choice = chooseInterpreter({ ...base, pythonExtension: "/ws/.venv/bin/python" });
    expect(choice).toEqual({ command: "/ws/.venv/bin/python", source: "python-extension" });
  });

  test("falls back to python3 on PATH without the Python extension", () => {
    expect(chooseInterpreter(base)).toEqual({ command: "python3", source: "path" });
  });

  test("ignores a blank setting", () => {
    expect(chooseInterpreter({ ...base, setting: "   " }).source).toBe("path");
  });

  test("does not run the workspace's environment before the workspace is trusted", () => {
    const choice = chooseInterpreter({ ...base, trusted: false, pythonExtension: "/ws/.venv/bin/python" });
    expect(choice).toEqual({ command: "python3", source: "path" });
  });

  test("expands ${workspaceFolder}, ${userHome} and ~ in the setting", () => {
    expect(chooseInterpreter({ ...base, setting: "${workspaceFolder}/.venv/bin/python" }).command).toBe(
      "/ws/.venv/bin/python",
    );
    expect(expandPath("~/envs/a/bin/python", undefined, "/home/u")).toBe("/home/u/envs/a/bin/python");
    expect(expandPath("${userHome}/x", undefined, "/home/u")).toBe("/home/u/x");
    expect(expandPath("~user/x", undefined, "/home/u")).toBe("~user/x");
  });

  test("says where the interpreter came from", () => {
    expect(describeChoice({ command: "python3", source: "path" })).toBe("python3 (from python3 on PATH)");
  });
});
