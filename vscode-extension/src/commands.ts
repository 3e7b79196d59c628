/**
 * The server's commands as the user meets them: from the palette they apply to the active
 * editor's targets; save asks for a path; run, show report and show graph open side views; write SARIF opens the
 * log in the SARIF Viewer when that is installed.
 *
 * vscode-languageclient registers the server's commands itself; this module is its
 * `executeCommand` middleware, so the same ids work from the palette and from CodeLens.
 */
import * as path from "path";
import * as vscode from "vscode";
import { GraphPayload, graphPanel } from "./graphPanel";
import type { ExportAnswer, JobCommandAnswer, NodesAt, ReportAnswer, SarifWritten } from "./payloads";
import { escapeHtml, htmlPage, renderRunError, renderRunReport } from "./runView";

export const SARIF_VIEWER = "MS-SarifVSCode.sarif-viewer";

type Next = (command: string, args: unknown[]) => Thenable<unknown> | unknown;

interface TargetRef {
  uri: string;
  name: string;
}

/** The targets of a document, read from the CodeLens the server provides for it. */
async function targetsOf(uri: vscode.Uri): Promise<string[]> {
  const lenses =
    (await vscode.commands.executeCommand<vscode.CodeLens[]>("vscode.executeCodeLensProvider", uri)) ?? [];
  const names = lenses
    .filter((lens) => lens.command?.command === "onnxlens.showReport")
    .map((lens) => String(lens.command?.arguments?.[1]));
  return [...new Set(names)];
}

function activePythonUri(): vscode.Uri | undefined {
  const editor = vscode.window.activeTextEditor;
  return editor && editor.document.languageId === "python" ? editor.document.uri : undefined;
}

/** The document a command is about: its first argument, else the active Python editor's. */
function documentUri(args: unknown[]): string | undefined {
  const uri = typeof args[0] === "string" ? args[0] : activePythonUri()?.toString();
  if (uri === undefined) {
    void vscode.window.showWarningMessage("onnxlens: open a Python file with an export target first.");
  }
  return uri;
}

/** The target the command is about: its arguments, else the active editor's (asking if several). */
async function resolveTarget(args: unknown[]): Promise<TargetRef | undefined> {
  if (typeof args[0] === "string" && typeof args[1] === "string") {
    return { uri: args[0], name: args[1] };
  }
  const document = documentUri(args);
  if (document === undefined) {
    return undefined;
  }
  const uri = vscode.Uri.parse(document);
  const names = await targetsOf(uri);
  if (names.length === 0) {
    void vscode.window.showWarningMessage(
      `onnxlens: ${path.basename(uri.fsPath)} has no export target. Mark one with an ` +
        "`# onnx-export:` comment above a model class or factory function.",
    );
    return undefined;
  }
  const name = names.length === 1 ? names[0] : await vscode.window.showQuickPick(names, { placeHolder: "Export target" });
  return name === undefined ? undefined : { uri: uri.toString(), name };
}

function failure(result: unknown): string | undefined {
  if (result && typeof result === "object" && "error" in result) {
    return String((result as { error: unknown }).error);
  }
  return undefined;
}

async function exportNow(args: unknown[], next: Next): Promise<unknown> {
  const uri = documentUri(args);
  if (uri === undefined) {
    return undefined;
  }
  const result = (await next("onnxlens.export", [uri])) as ExportAnswer | undefined;
  const parts = Object.entries(result?.targets ?? {}).map(([name, t]) =>
    t.ok ? `${name} ✓` : `${name} ✗ ${t.problems} problem${t.problems === 1 ? "" : "s"}`,
  );
  vscode.window.setStatusBarMessage(`onnxlens: ${parts.join(" · ") || "no export targets"}`, 5000);
  return result;
}

async function saveModel(args: unknown[], next: Next): Promise<unknown> {
  const target = await resolveTarget(args);
  if (target === undefined) {
    return undefined;
  }
  const source = vscode.Uri.parse(target.uri);
  const suggested = vscode.Uri.file(path.join(path.dirname(source.fsPath), `${target.name}.onnx`));
  const destination = typeof args[2] === "string"
    ? vscode.Uri.file(args[2])
    : await vscode.window.showSaveDialog({
        defaultUri: suggested,
        filters: { "ONNX model": ["onnx"] },
        saveLabel: "Save ONNX model",
        title: `Save ${target.name} as ONNX`,
      });
  if (destination === undefined) {
    return undefined;
  }
  const result = (await next("onnxlens.saveModel", [target.uri, target.name, destination.fsPath])) as
    | JobCommandAnswer
    | undefined;
  const error = failure(result);
  if (error !== undefined || !result?.saved) {
    const problems = result?.diagnostics?.length ? ` (${result.diagnostics.join("; ")})` : "";
    void vscode.window.showErrorMessage(`onnxlens: ${target.name} was not saved: ${error ?? "unknown error"}${problems}`);
    return result;
  }
  const written = result.written ?? [destination.fsPath];
  void vscode.window.showInformationMessage(
    `onnxlens: saved ${target.name} to ${written.map((p) => path.basename(p)).join(", ")}.`,
  );
  return result;
}

/** One reusable panel per kind of view (run results, reports). */
const panels = new Map<string, vscode.WebviewPanel>();

function showPanel(kind: string, title: string, html: string): void {
  let panel = panels.get(kind);
  if (panel === undefined) {
    panel = vscode.window.createWebviewPanel(`onnxlens.${kind}`, title, vscode.ViewColumn.Beside, {
      enableScripts: false,
    });
    panel.onDidDispose(() => panels.delete(kind));
    panels.set(kind, panel);
  }
  panel.title = title;
  panel.webview.html = html;
  panel.reveal(vscode.ViewColumn.Beside, true);
}

async function runModel(args: unknown[], next: Next): Promise<unknown> {
  const target = await resolveTarget(args);
  if (target === undefined) {
    return undefined;
  }
  const result = (await next("onnxlens.runModel", [target.uri, target.name])) as JobCommandAnswer | undefined;
  const title = `ORT: ${target.name}`;
  if (result?.report) {
    showPanel("run", title, renderRunReport(result.report));
  } else {
    showPanel("run", title, renderRunError(target.name, failure(result) ?? "no result", result?.diagnostics ?? []));
  }
  return result;
}

async function showReport(args: unknown[], next: Next): Promise<unknown> {
  const uri = documentUri(args);
  if (uri === undefined) {
    return undefined;
  }
  const result = (await next("onnxlens.showReport", typeof args[1] === "string" ? [uri, args[1]] : [uri])) as
    | ReportAnswer
    | undefined;
  const markdown = result?.markdown ?? "";
  let body: string;
  try {
    // VS Code's own Markdown renderer (the built-in Markdown extension).
    body = await vscode.commands.executeCommand<string>("markdown.api.render", markdown);
  } catch {
    body = `<pre>${escapeHtml(markdown)}</pre>`;
  }
  const name = typeof args[1] === "string" ? args[1] : path.basename(vscode.Uri.parse(uri).fsPath);
  showPanel("report", `ONNX report: ${name}`, htmlPage(`ONNX report: ${name}`, body));
  return result;
}

const UNTRUSTED_GRAPH = "onnxlens: a graph is made by running the model: trust this workspace first.";

/** The target's checked graph in the graph panel beside the editor. */
async function showGraph(args: unknown[], next: Next): Promise<unknown> {
  if (!vscode.workspace.isTrusted) {
    void vscode.window.showWarningMessage(UNTRUSTED_GRAPH);
    return undefined;
  }
  const target = await resolveTarget(args);
  if (target === undefined) {
    return undefined;
  }
  const result = (await next("onnxlens.showGraph", [target.uri, target.name])) as GraphPayload | undefined;
  if (result === undefined || result.cancelled) {
    return result;
  }
  if (result.error !== undefined || result.url === undefined) {
    void vscode.window.showErrorMessage(`onnxlens: ${result.error ?? "no graph"}`);
    return result;
  }
  graphPanel.show(result);
  return result;
}

/**
 * "Show in Graph": the nodes the editor's line produced, selected in the graph panel (the
 * document's graph is opened first when the panel shows none).
 */
export async function showInGraph(): Promise<void> {
  if (!vscode.workspace.isTrusted) {
    void vscode.window.showWarningMessage(UNTRUSTED_GRAPH);
    return;
  }
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined || editor.document.languageId !== "python") {
    void vscode.window.showWarningMessage("onnxlens: open a Python file with an export target first.");
    return;
  }
  const uri = editor.document.uri.toString();
  const line = editor.selection.active.line;
  if (graphPanel.uri !== uri) {
    const shown = (await vscode.commands.executeCommand("onnxlens.showGraph", uri)) as GraphPayload | undefined;
    if (shown?.url === undefined) {
      return;
    }
  }
  // `line` is 0-based, as LSP positions are
  const found = (await vscode.commands.executeCommand("onnxlens.graphNodesAt", uri, line)) as NodesAt | undefined;
  const first = found?.nodes?.[0];
  if (first === undefined) {
    vscode.window.setStatusBarMessage(`onnxlens: no node of the graph comes from line ${line + 1}`, 5000);
    return;
  }
  graphPanel.select(first.nodeId);
}

async function writeSarif(args: unknown[], next: Next): Promise<unknown> {
  const result = (await next("onnxlens.writeSarif", args)) as SarifWritten | undefined;
  if (!result?.path) {
    return result;
  }
  const log = vscode.Uri.file(result.path);
  const viewer = vscode.extensions.getExtension(SARIF_VIEWER);
  if (viewer !== undefined) {
    const api = (await viewer.activate()) as { openLogs?: (logs: vscode.Uri[]) => Promise<void> } | undefined;
    if (api?.openLogs) {
      await api.openLogs([log]);
      return result;
    }
  }
  const choice = await vscode.window.showInformationMessage(`onnxlens: wrote ${result.path}`, "Open");
  if (choice === "Open") {
    await vscode.window.showTextDocument(log);
  }
  return result;
}

const HANDLERS: Record<string, (args: unknown[], next: Next) => Promise<unknown>> = {
  "onnxlens.export": exportNow,
  "onnxlens.saveModel": saveModel,
  "onnxlens.runModel": runModel,
  "onnxlens.showReport": showReport,
  "onnxlens.showGraph": showGraph,
  "onnxlens.writeSarif": writeSarif,
};

/** The languageclient middleware: user-facing behaviour around the server's commands. */
export async function executeCommand(command: string, args: unknown[], next: Next): Promise<unknown> {
  const handler = HANDLERS[command];
  try {
    return handler ? await handler(args, next) : await next(command, args);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    void vscode.window.showErrorMessage(`onnxlens: ${command.replace("onnxlens.", "")} failed: ${message}`);
    return undefined;
  }
}
