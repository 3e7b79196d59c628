/** The user's Python as VS Code knows it: the chosen interpreter, what it has installed, and
 * pip installs into it. */
import { execFile } from "child_process";
import * as os from "os";
import * as vscode from "vscode";
import { chooseInterpreter, InterpreterChoice } from "./interpreter";
import { installArguments, InstallPlan, parseProbe, PROBE_SCRIPT, ProbeResult } from "./probe";

const PYTHON_EXTENSION = "ms-python.python";

async function pythonExtensionApi() {
  if (vscode.extensions.getExtension(PYTHON_EXTENSION) === undefined) {
    return undefined;
  }
  const { PythonExtension } = await import("@vscode/python-extension");
  return PythonExtension.api();
}

/** The Python extension's active environment, when that extension is installed. */
async function pythonExtensionInterpreter(resource: vscode.Uri | undefined, log: vscode.LogOutputChannel) {
  try {
    const api = await pythonExtensionApi();
    if (api === undefined) {
      return undefined;
    }
    const active = api.environments.getActiveEnvironmentPath(resource);
    const resolved = await api.environments.resolveEnvironment(active);
    return resolved?.executable.uri?.fsPath ?? active.path;
  } catch (error) {
    log.warn(`The Python extension did not name an interpreter: ${String(error)}`);
    return undefined;
  }
}

export async function resolveInterpreter(log: vscode.LogOutputChannel): Promise<InterpreterChoice> {
  const folder = vscode.workspace.workspaceFolders?.[0];
  const trusted = vscode.workspace.isTrusted;
  return chooseInterpreter({
    setting: vscode.workspace.getConfiguration("onnxlens", folder?.uri).get<string>("interpreter"),
    pythonExtension: trusted ? await pythonExtensionInterpreter(folder?.uri, log) : undefined,
    trusted,
    workspaceFolder: folder?.uri.fsPath,
    home: os.homedir(),
  });
}

/** Call `changed` when the Python extension's active environment changes (if installed). */
export async function onPythonEnvironmentChange(
  context: vscode.ExtensionContext,
  log: vscode.LogOutputChannel,
  changed: () => void,
): Promise<void> {
  try {
    const api = await pythonExtensionApi();
    if (api !== undefined) {
      context.subscriptions.push(api.environments.onDidChangeActiveEnvironmentPath(changed));
    }
  } catch (error) {
    log.warn(`Not following the Python extension's environment: ${String(error)}`);
  }
}

/** Run the probe in the interpreter; rejects with its error output when it cannot run. The
 * working directory is the extension's, so nothing of the workspace is on sys.path. */
export function probeInterpreter(choice: InterpreterChoice, cwd: string): Promise<ProbeResult> {
  return new Promise((resolve, reject) =>
    execFile(choice.command, ["-c", PROBE_SCRIPT], { cwd, timeout: 60000 }, (error, out, err) => {
      if (error) {
        reject(new Error(err.trim() || error.message));
        return;
      }
      try {
        resolve(parseProbe(out));
      } catch (parseError) {
        reject(parseError);
      }
    }),
  );
}

/** pip install into the interpreter as VS Code tasks (output in a terminal), one command of
 * the plan after the other; the first non-zero exit code, or 0. */
export async function installPackages(choice: InterpreterChoice, plan: InstallPlan): Promise<number | undefined> {
  for (const args of installArguments(plan)) {
    const exitCode = await runTask(choice, args);
    if (exitCode !== 0) {
      return exitCode;
    }
  }
  return 0;
}

async function runTask(choice: InterpreterChoice, args: string[]): Promise<number | undefined> {
  const task = new vscode.Task(
    { type: "onnxlens", task: "install" },
    vscode.TaskScope.Workspace,
    `pip ${args.slice(2).join(" ")}`,
    "onnxlens",
    new vscode.ProcessExecution(choice.command, args),
  );
  const ended = new Promise<number | undefined>((resolve) => {
    const listener = vscode.tasks.onDidEndTaskProcess((event) => {
      if (event.execution.task.name === task.name) {
        listener.dispose();
        resolve(event.exitCode);
      }
    });
  });
  await vscode.tasks.executeTask(task);
  return ended;
}
