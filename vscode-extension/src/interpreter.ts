/** Which Python runs the server: the setting, else the Python extension's environment, else
 * `python3` on PATH. Pure functions; `extension.ts` supplies what VS Code knows. */

export type InterpreterSource = "setting" | "python-extension" | "path";

export interface InterpreterChoice {
  command: string;
  source: InterpreterSource;
}

export interface InterpreterInputs {
  /** `onnxlens.interpreter` (VS Code ignores the workspace's value in restricted mode). */
  setting: string | undefined;
  /** The Python extension's active environment, when that extension is installed. */
  pythonExtension: string | undefined;
  /** Whether the workspace is trusted. */
  trusted: boolean;
  workspaceFolder: string | undefined;
  home: string;
}

export const DEFAULT_PYTHON = "python3";

/** Expand `${workspaceFolder}`, `${userHome}` and a leading `~`. */
export function expandPath(value: string, workspaceFolder: string | undefined, home: string): string {
  let expanded = value.trim();
  if (expanded === "~" || expanded.startsWith("~/")) {
    expanded = home + expanded.slice(1);
  }
  expanded = expanded.replace(/\$\{userHome\}/g, home);
  if (workspaceFolder !== undefined) {
    expanded = expanded.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
  }
  return expanded;
}

/**
 * The interpreter to start. In an untrusted workspace the Python extension's environment is
 * not used: it is often the workspace's own virtual environment, which the user has not
 * agreed to run yet.
 */
export function chooseInterpreter(inputs: InterpreterInputs): InterpreterChoice {
  const setting = inputs.setting?.trim();
  if (setting) {
    return { command: expandPath(setting, inputs.workspaceFolder, inputs.home), source: "setting" };
  }
  if (inputs.trusted && inputs.pythonExtension) {
    return { command: inputs.pythonExtension, source: "python-extension" };
  }
  return { command: DEFAULT_PYTHON, source: "path" };
}

export function describeChoice(choice: InterpreterChoice): string {
  const from = {
    setting: "the onnxlens.interpreter setting",
    "python-extension": "the Python extension's active environment",
    path: "python3 on PATH",
  }[choice.source];
  return `${choice.command} (from ${from})`;
}
