/**
 * The server's settings (exporter/config/options.py) as VS Code stores them under `onnxlens.*`,
 * and what a configuration change asks of the extension.
 */

/** Settings the server reads; each is passed through unchanged. */
export const SERVER_SETTINGS = [
  "trigger",
  "debounceMs",
  "timeoutSeconds",
  "memoryLimitMB",
  "fixBudgetSeconds",
  "maxConcurrentChecks",
  "memoryBudgetMB",
  "diagnosticMode",
  "atol",
  "rtol",
  "opset",
  "runtimes",
  "precision",
  "sarif.outputDirectory",
  "logLevel",
  "select",
  "ignore",
  "severity",
  "exclude",
  "extendExclude",
] as const;

/** Settings only the extension reads. */
export const CLIENT_SETTINGS = ["interpreter"] as const;

/** `get(key)` of a `WorkspaceConfiguration` for the `onnxlens` section. */
export type SettingReader = (key: string) => unknown;

/** What `WorkspaceConfiguration.inspect(key)` tells of a setting (its default aside). */
export interface InspectedSetting {
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/**
 * The value the user set, the most specific scope first (a folder's, the workspace's, the
 * user's); undefined where only the extension's declared default applies. Not
 * `WorkspaceConfiguration.get`, which answers with package.json's default: `ignore: []` sent
 * as a setting overrode a folder's `[tool.onnxlens] ignore`.
 */
export function setByUser(inspected: InspectedSetting | undefined): unknown {
  return inspected?.workspaceFolderValue ?? inspected?.workspaceValue ?? inspected?.globalValue;
}

/**
 * The server's settings object: camelCase keys as the server expects them, `sarif` nested.
 * Unset values (`undefined`) are left out so the server's own defaults and the workspace's
 * `[tool.onnxlens]` apply.
 */
export function serverSettings(read: SettingReader): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  for (const key of SERVER_SETTINGS) {
    const value = read(key);
    if (value === undefined) {
      continue;
    }
    const [head, tail] = key.split(".");
    if (tail === undefined) {
      settings[head] = value;
    } else {
      const group = (settings[head] ?? {}) as Record<string, unknown>;
      group[tail] = value;
      settings[head] = group;
    }
  }
  return settings;
}

/**
 * What a configuration change asks of the extension: a new interpreter needs a new server
 * (`restart`); the server applies its own settings live (`reload`: it is told and reads them
 * again, its torch worker stays warm); anything else is not ours (`none`).
 */
export function configurationChange(affects: (section: string) => boolean): "restart" | "reload" | "none" {
  if (CLIENT_SETTINGS.some((key) => affects(`onnxlens.${key}`))) {
    return "restart";
  }
  return SERVER_SETTINGS.some((key) => affects(`onnxlens.${key}`)) ? "reload" : "none";
}
