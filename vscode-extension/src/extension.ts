/**
 * The onnxlens VS Code extension: starts the bundled language server with the chosen Python,
 * restarts it when the interpreter changes, tells it when its settings change (it applies them
 * live), forwards Workspace Trust, and shows the server's state as a language status item.
 */
import * as path from "path";
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
} from "vscode-languageclient/node";
import { executeCommand, showInGraph } from "./commands";
import { editorsNotification } from "./editors";
import { GraphPayload, graphPanel } from "./graphPanel";
import { describeChoice, InterpreterChoice } from "./interpreter";
import type { ServerState } from "./payloads";
import { InstallPlan, judgeProbe, ProbeResult } from "./probe";
import { installPackages, onPythonEnvironmentChange, probeInterpreter, resolveInterpreter } from "./python";
import { configurationChange, serverSettings, setByUser } from "./settings";
import { ProblemCount, SHOW_OUTPUT, ServerPhase, StatusInputs, StatusSeverity, statusView } from "./status";

class OnnxLens {
  private client: LanguageClient | undefined;
  private interpreter: InterpreterChoice | undefined;
  private restarting: Promise<void> = Promise.resolve();
  private editorWatchers: vscode.Disposable[] = [];
  private readonly status: vscode.LanguageStatusItem;
  private readonly problems = new ProblemCount();
  private state: StatusInputs = {
    server: "stopped",
    trusted: vscode.workspace.isTrusted,
    workerState: "stopped",
    checking: 0,
    problems: 0,
    missing: [],
  };

  constructor(
    private readonly context: vscode.ExtensionContext,
    readonly output: vscode.LogOutputChannel,
  ) {
    // Python files and notebook cells: where onnxlens finds its targets
    this.status = vscode.languages.createLanguageStatusItem("onnxlens.status", { language: "python" });
    this.status.name = "onnxlens";
    context.subscriptions.push(this.status);
  }

  // -- status ------------------------------------------------------------------------------

  private update(change: Partial<StatusInputs>): void {
    this.state = { ...this.state, ...change };
    const view = statusView(this.state);
    this.status.text = view.text;
    this.status.detail = view.detail;
    this.status.severity = SEVERITY[view.severity];
    this.status.busy = view.busy;
    this.status.command = view.command;
  }

  /** Count onnxlens's diagnostics again, for the documents whose diagnostics changed only. */
  countProblems(uris: readonly vscode.Uri[]): void {
    for (const uri of uris) {
      const ours = vscode.languages.getDiagnostics(uri).filter((d) => d.source === "onnxlens").length;
      this.problems.set(uri.toString(), ours);
    }
    this.update({ problems: this.problems.total });
  }

  /** The server's settings changed: it reads them again, and keeps its warm worker. */
  async reloadSettings(): Promise<void> {
    await this.restarting; // a restart under way starts with the new settings anyway
    const client = this.client;
    if (client === undefined || !client.isRunning()) {
      return;
    }
    const folder = vscode.workspace.workspaceFolders?.[0];
    const settings = serverSettings((key) => setByUser(vscode.workspace.getConfiguration("onnxlens", folder?.uri).inspect(key)));
    this.output.info("The onnxlens settings changed: the server reads them again");
    await client.sendNotification(DidChangeConfigurationNotification.type, { settings: { onnxlens: settings } });
  }

  // -- interpreter -------------------------------------------------------------------------

  /** Check the interpreter runs and has the export packages; tell the user what is missing. */
  private async probe(choice: InterpreterChoice): Promise<boolean> {
    let probe: ProbeResult;
    try {
      probe = await probeInterpreter(choice, this.context.extensionPath);
    } catch (error) {
      const message = `onnxlens cannot start Python ${describeChoice(choice)}: ${(error as Error).message}`;
      this.output.error(message);
      void vscode.window.showErrorMessage(message, "Open Settings").then((answer) => {
        if (answer) {
          void vscode.commands.executeCommand("workbench.action.openSettings", "onnxlens.interpreter");
        }
      });
      return false;
    }
    const verdict = judgeProbe(probe);
    this.update({ missing: verdict.kind === "missing" ? verdict.packages : [] });
    if (verdict.kind === "too-old") {
      this.output.error(verdict.message);
      void vscode.window.showErrorMessage(verdict.message);
      return false;
    }
    if (verdict.kind === "missing") {
      this.output.warn(verdict.message);
      const install = `Install ${verdict.packages.join(", ")}`;
      void vscode.window.showErrorMessage(verdict.message, install, "Choose Interpreter").then((answer) => {
        if (answer === install) {
          void this.install(choice, verdict.install);
        } else if (answer) {
          void vscode.commands.executeCommand("workbench.action.openSettings", "onnxlens.interpreter");
        }
      });
    }
    return true; // without the packages the server still starts: targets and CodeLens work
  }

  /** Install the plan into the interpreter with pip, in visible tasks; restart when done. */
  private async install(choice: InterpreterChoice, plan: InstallPlan): Promise<void> {
    this.output.info(`onnxlens: ${plan.description}`);
    const exitCode = await installPackages(choice, plan);
    if (exitCode === 0) {
      await this.restart("the export packages were installed");
    } else {
      void vscode.window.showErrorMessage(`onnxlens: pip install ended with exit code ${exitCode}; see the terminal.`);
    }
  }

  // -- server ------------------------------------------------------------------------------

  private clientOptions(): LanguageClientOptions {
    const folder = vscode.workspace.workspaceFolders?.[0];
    return {
      // Python files, and the Python cells of notebooks (CodeLens, hover and quick fixes on
      // cells; the notebooks themselves are synced as the server asks, docs/notebooks.md)
      documentSelector: [
        { scheme: "file", language: "python" },
        { notebook: "*", language: "python" },
      ],
      outputChannel: this.output,
      diagnosticCollectionName: "onnxlens",
      initializationOptions: {
        trusted: vscode.workspace.isTrusted,
        graphPanel: true, // graphs open in our panel (graphPanel.ts), not in the browser
        settings: serverSettings((key) => setByUser(vscode.workspace.getConfiguration("onnxlens", folder?.uri).inspect(key))),
      },
      middleware: {
        executeCommand,
        workspace: {
          // The server asks for section `onnxlens`; answer with only the settings it knows.
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            if (!Array.isArray(answers)) {
              return answers;
            }
            return params.items.map((item, index) => {
              if (item.section !== "onnxlens") {
                return answers[index];
              }
              const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : folder?.uri;
              return serverSettings((key) => setByUser(vscode.workspace.getConfiguration("onnxlens", scope).inspect(key)));
            });
          },
        },
      },
    };
  }

  async start(): Promise<void> {
    this.update({ server: "starting", workerState: "stopped", checking: 0, trusted: vscode.workspace.isTrusted });
    const choice = await resolveInterpreter(this.output);
    this.interpreter = choice;
    this.output.info(`Starting the onnxlens server with ${describeChoice(choice)}`);
    if (!(await this.probe(choice))) {
      this.update({ server: "failed" });
      return;
    }
    const bundle = path.join(this.context.extensionPath, "bundled");
    const folder = vscode.workspace.workspaceFolders?.[0];
    const serverOptions: ServerOptions = {
      command: choice.command,
      args: [path.join(bundle, "tool", "onnxlens_server.py")],
      options: {
        cwd: folder?.uri.fsPath ?? bundle,
        env: { ...process.env, PYTHONUNBUFFERED: "1" },
      },
    };
    const client = new LanguageClient("onnxlens", "onnxlens", serverOptions, this.clientOptions());
    client.onDidChangeState((event) => {
      if (event.newState === State.Running) {
        this.update({ server: "running" });
      } else if (event.newState === State.Stopped) {
        this.update({ server: this.client === client ? "failed" : "stopped", workerState: "stopped", checking: 0 });
      }
    });
    this.client = client;
    try {
      await client.start();
    } catch (error) {
      this.output.error(`The onnxlens server did not start: ${String(error)}`);
      this.update({ server: "failed" });
      return;
    }
    client.onNotification("onnxlens/graphChanged", (graph: GraphPayload) => graphPanel.update(graph));
    graphPanel.onClosed = () => void client.sendNotification("onnxlens/graphClosed", {}).catch(() => undefined);
    client.onNotification("onnxlens/state", (state: ServerState) =>
      this.update({ trusted: state.trusted, workerState: state.workerState, checking: state.checking.length }),
    );
    // the server's queue checks the file in front of the user first
    const sendEditors = (): void => {
      const uri = (editor: vscode.TextEditor): string => client.code2ProtocolConverter.asUri(editor.document.uri);
      const active = vscode.window.activeTextEditor;
      void client.sendNotification(
        "onnxlens/editors",
        editorsNotification(active && uri(active), vscode.window.visibleTextEditors.map(uri)),
      );
    };
    sendEditors();
    this.editorWatchers = [
      vscode.window.onDidChangeActiveTextEditor(sendEditors),
      vscode.window.onDidChangeVisibleTextEditors(sendEditors),
    ];
  }

  async stop(): Promise<void> {
    this.editorWatchers.forEach((watcher) => watcher.dispose());
    this.editorWatchers = [];
    const client = this.client;
    this.client = undefined;
    graphPanel.onClosed = () => undefined;
    graphPanel.close(); // the server's viewer stops with it
    if (client !== undefined) {
      try {
        await client.stop(10000);
      } catch (error) {
        this.output.warn(`The onnxlens server did not stop cleanly: ${String(error)}`);
      }
    }
    this.update({ server: "stopped" });
  }

  /** Restarts run one after another, so a burst of setting changes cannot interleave them. */
  restart(reason: string): Promise<void> {
    this.restarting = this.restarting.then(async () => {
      this.output.info(`Restarting the onnxlens server: ${reason}`);
      await this.stop();
      await this.start();
    });
    return this.restarting;
  }

  /** Trust granted: a new interpreter may now apply (restart), else the server is told. */
  async trustGranted(): Promise<void> {
    const choice = await resolveInterpreter(this.output);
    if (this.client === undefined || choice.command !== this.interpreter?.command) {
      await this.restart("the workspace is now trusted");
      return;
    }
    this.update({ trusted: true });
    await this.client.sendNotification("onnxlens/trustChanged", { trusted: true });
  }
}

const SEVERITY: Record<StatusSeverity, vscode.LanguageStatusSeverity> = {
  information: vscode.LanguageStatusSeverity.Information,
  warning: vscode.LanguageStatusSeverity.Warning,
  error: vscode.LanguageStatusSeverity.Error,
};

let lens: OnnxLens | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel("onnxlens", { log: true });
  context.subscriptions.push(output);
  lens = new OnnxLens(context, output);
  const current = lens;
  context.subscriptions.push(
    vscode.commands.registerCommand("onnxlens.restartServer", () => current.restart("asked for")),
    vscode.commands.registerCommand(SHOW_OUTPUT, () => output.show(true)),
    vscode.commands.registerCommand("onnxlens.showInGraph", () => showInGraph()),
    vscode.languages.onDidChangeDiagnostics((event) => current.countProblems(event.uris)),
    vscode.workspace.onDidGrantWorkspaceTrust(() => current.trustGranted()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      const change = configurationChange((section) => event.affectsConfiguration(section));
      if (change === "restart") {
        void current.restart("the interpreter setting changed");
      } else if (change === "reload") {
        void current.reloadSettings();
      }
    }),
  );
  await onPythonEnvironmentChange(context, current.output, () => {
    if (!vscode.workspace.getConfiguration("onnxlens").get<string>("interpreter")) {
      void current.restart("the Python environment changed");
    }
  });
  await current.start();
}

export async function deactivate(): Promise<void> {
  await lens?.stop();
}
