import { expect, test } from "@playwright/test";
import manifest from "../../package.json";
import { configurationChange, SERVER_SETTINGS, serverSettings, setByUser } from "../../src/settings";

/** The setting keys the server accepts (exporter/config/options.py), as the server names them. */
const SERVER_KEYS = ["trigger", "debounceMs", "timeoutSeconds", "memoryLimitMB", "atol", "rtol", "opset",
  "sarif", "logLevel", "select", "ignore"];

test.describe("setByUser", () => {
  test("is undefined where only the declared default applies, so pyproject.toml's settings apply", () => {
    expect(setByUser(undefined)).toBeUndefined();
    expect(setByUser({})).toBeUndefined(); // inspect() of a setting nobody set: its default aside
  });

  test("takes the most specific scope the user set, a value equal to the default included", () => {
    expect(setByUser({ globalValue: ["ONNX1"] })).toEqual(["ONNX1"]);
    expect(setByUser({ globalValue: ["ONNX1"], workspaceValue: ["ONNX2"] })).toEqual(["ONNX2"]);
    expect(setByUser({ globalValue: 30, workspaceValue: 40, workspaceFolderValue: 50 })).toBe(50);
    expect(setByUser({ workspaceFolderValue: [] })).toEqual([]); // set to the default on purpose
  });
});

test.describe("serverSettings", () => {
  test("passes every server setting through under the server's names, sarif nested", () => {
    const values: Record<string, unknown> = {
      trigger: "onType", debounceMs: 250, timeoutSeconds: 30, memoryLimitMB: 2048, atol: 1e-4, rtol: null,
      opset: 18, "sarif.outputDirectory": "reports", logLevel: "debug", select: ["ONNX1"], ignore: ["ONNX502"],
    };
    const settings = serverSettings((key) => values[key]);
    expect(Object.keys(settings).sort()).toEqual([...SERVER_KEYS].sort());
    expect(settings).toMatchObject({ trigger: "onType", debounceMs: 250, atol: 1e-4, rtol: null, opset: 18,
      sarif: { outputDirectory: "reports" }, select: ["ONNX1"], ignore: ["ONNX502"] });
  });

  test("never sends client-only settings such as the interpreter", () => {
    const settings = serverSettings((key) => (key === "interpreter" ? "/usr/bin/python3" : undefined));
    expect(settings).toEqual({});
  });

  test("leaves out unset values so pyproject.toml and the server's defaults apply", () => {
    expect(serverSettings((key) => (key === "opset" ? 17 : undefined))).toEqual({ opset: 17 });
  });

  test("declares every server setting in package.json with the same default as the server", () => {
    const properties = (manifest as { contributes: { configuration: { properties: Record<string, { default: unknown }> } } })
      .contributes.configuration.properties;
    for (const key of SERVER_SETTINGS) {
      expect(properties).toHaveProperty([`onnxlens.${key}`]);
    }
    expect(properties["onnxlens.trigger"].default).toBe("onSave");
    expect(properties["onnxlens.timeoutSeconds"].default).toBeNull();  // unset: the server's default limits
    expect(properties["onnxlens.memoryLimitMB"].default).toBe(4096);
  });
});

test.describe("configurationChange", () => {
  test("restarts the server only for the interpreter", () => {
    expect(configurationChange((s) => s === "onnxlens.interpreter")).toBe("restart");
    expect(configurationChange((s) => s === "onnxlens.interpreter" || s === "onnxlens.opset")).toBe("restart");
  });

  test("reloads the settings in the running server for every server setting", () => {
    for (const key of SERVER_SETTINGS) {
      expect(configurationChange((s) => s === `onnxlens.${key}`)).toBe("reload");
    }
  });

  test("does nothing for the message trace or other extensions' settings", () => {
    expect(configurationChange((s) => s === "onnxlens.trace.server")).toBe("none");
    expect(configurationChange((s) => s === "python.defaultInterpreterPath")).toBe("none");
  });
});
