/**
 * The graph panel (issue 29, docs/graph.md): the graph onnxlens checked, in Google's Model
 * Explorer served by the language server on a loopback port, in a webview beside the editor.
 *
 * The webview's page holds an <iframe> on the viewer's page and relays its messages: Model
 * Explorer posts `model-explorer-node-selected` to its parent, which the panel turns into the
 * node's source line in the editor; "Show in Graph" posts `model-explorer-select-node-by-node-id`
 * to it. Nothing else is loaded: the page's CSP allows frames from the loopback only.
 */
import * as vscode from "vscode";

export interface LspRange {
  start: { line: number; character: number };
  end: { line: number; character: number };
}

export interface GraphNode {
  graphId: string;
  nodeId: string;
  opType: string;
  location: { uri: string; range: LspRange };
  callers: Array<{ uri: string; range: LspRange }>;
}

/** What `onnxlens.showGraph` answers and `onnxlens/graphChanged` carries. */
export interface GraphPayload {
  url?: string;
  uri?: string;
  target?: string;
  graphId?: string;
  selectedNode?: string | null;
  selectedGraph?: string | null;
  nodes?: Record<string, GraphNode>;
  error?: string;
  cancelled?: boolean;
}

/** A message the panel's page relays from Model Explorer. */
interface ViewerMessage {
  cmd?: string;
  nodeId?: string;
}

export function escapeAttribute(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

function nonce(): string {
  let text = "";
  const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  for (let i = 0; i < 32; i++) {
    text += chars.charAt(Math.floor(Math.random() * chars.length));
  }
  return text;
}

/** The panel's page: a line saying what is shown (or what went wrong) and the viewer's frame. */
export function graphHtml(url: string | undefined, status: string, failed: boolean): string {
  const key = nonce();
  const frame = url
    ? `<iframe id="viewer" src="${escapeAttribute(url)}" title="Model Explorer"></iframe>`
    : "";
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; frame-src http://127.0.0.1:* http://localhost:* http://[::1]:*; style-src 'unsafe-inline'; script-src 'nonce-${key}';">
<style>
  html, body { height: 100%; margin: 0; padding: 0; overflow: hidden; }
  body { display: flex; flex-direction: column; font-family: var(--vscode-font-family); }
  #status { padding: 3px 8px; font-size: 12px; color: var(--vscode-descriptionForeground); }
  #status.failed { color: var(--vscode-errorForeground); }
  iframe { flex: 1; border: 0; width: 100%; background: white; }
</style>
</head>
<body>
<div id="status" class="${failed ? "failed" : ""}">${escapeAttribute(status)}</div>
${frame}
<script nonce="${key}">
  const vscode = acquireVsCodeApi();
  const frame = document.getElementById("viewer");
  const origin = frame ? new URL(frame.src).origin : "";
  window.addEventListener("message", (event) => {
    if (frame && event.source === frame.contentWindow) {
      const data = event.data || {};
      if (data.cmd === "model-explorer-node-selected" || data.cmd === "model-explorer-ready") {
        vscode.postMessage({ cmd: data.cmd, nodeId: data.nodeId });
      }
      return;
    }
    const message = event.data || {};
    if (frame && message.type === "select") {
      frame.contentWindow.postMessage({ cmd: "model-explorer-select-node-by-node-id", nodeId: message.nodeId }, origin);
    }
  });
</script>
</body>
</html>`;
}

/** The one graph panel: created by the first graph, re-rendered by the later ones. */
export class GraphPanel {
  private panel: vscode.WebviewPanel | undefined;
  private graph: GraphPayload | undefined;
  private ready = false;
  private pending: string | undefined; // a node to select once the viewer is ready
  // the selection Model Explorer reports back for a node the panel selected itself (the
  // failing node of a new page, "Show in Graph"): not the user's click, the editor stays
  private echo: string | undefined;
  private sourceColumn: vscode.ViewColumn = vscode.ViewColumn.One;
  /** Called when the user closed the panel (the server stops re-rendering it). */
  onClosed: () => void = () => undefined;

  /** The document whose graph the panel shows. */
  get uri(): string | undefined {
    return this.panel ? this.graph?.uri : undefined;
  }

  show(graph: GraphPayload): void {
    this.sourceColumn = vscode.window.activeTextEditor?.viewColumn ?? this.sourceColumn;
    if (this.panel === undefined) {
      const panel = vscode.window.createWebviewPanel("onnxlens.graph", "Graph", {
        viewColumn: vscode.ViewColumn.Beside,
        preserveFocus: true,
      }, { enableScripts: true, retainContextWhenHidden: true });
      panel.webview.onDidReceiveMessage((message: ViewerMessage) => this.received(message));
      panel.onDidDispose(() => {
        this.panel = undefined;
        this.graph = undefined;
        this.onClosed();
      });
      this.panel = panel;
    }
    this.render(graph);
    this.panel.reveal(undefined, true);
  }

  /** The server rendered the graph again after a check (`onnxlens/graphChanged`). */
  update(graph: GraphPayload): void {
    if (this.panel !== undefined && graph.uri === this.graph?.uri) {
      this.render(graph);
    }
  }

  /** The server stopped, and its viewer with it: the panel goes. */
  close(): void {
    this.panel?.dispose();
  }

  /** Select a node in the viewer (at once, or once it is ready). */
  select(nodeId: string): void {
    if (this.ready) {
      this.echo = nodeId;
      void this.panel?.webview.postMessage({ type: "select", nodeId });
    } else {
      this.pending = nodeId;
    }
  }

  node(nodeId: string): GraphNode | undefined {
    const nodes = this.graph?.nodes ?? {};
    return nodes[nodeId] ?? Object.values(nodes).find((node) => node.nodeId === nodeId);
  }

  private render(graph: GraphPayload): void {
    const panel = this.panel;
    if (panel === undefined) {
      return;
    }
    const target = graph.target ?? this.graph?.target ?? "";
    panel.title = `Graph: ${target}`;
    if (graph.error !== undefined || graph.url === undefined) {
      // the last graph stays in view, below what went wrong
      const error = `${graph.error ?? "no graph"} (the graph below is from an earlier check)`;
      if (this.graph?.url === undefined) {
        panel.webview.html = graphHtml(undefined, graph.error ?? "no graph", true);
      } else {
        panel.webview.html = graphHtml(this.graph.url, error, true);
        this.ready = false;
      }
      return;
    }
    this.graph = graph;
    this.ready = false;
    this.echo = graph.selectedNode ?? undefined;
    const count = Object.keys(graph.nodes ?? {}).length;
    const selected = graph.selectedNode ? this.node(graph.selectedNode) : undefined;
    const status = selected
      ? `${target}: ${count} nodes mapped to source · selected ${selected.opType} ${selected.nodeId} (the failing node)`
      : `${target}: ${count} nodes mapped to source · click a node to see its line`;
    panel.webview.html = graphHtml(graph.url, status, false);
  }

  private received(message: ViewerMessage): void {
    if (message.cmd === "model-explorer-ready") {
      this.ready = true;
      if (this.pending !== undefined) {
        const nodeId = this.pending;
        this.pending = undefined;
        this.select(nodeId);
      }
    } else if (message.cmd === "model-explorer-node-selected" && message.nodeId) {
      const echo = this.echo;
      this.echo = undefined;
      if (message.nodeId !== echo) {
        void this.reveal(message.nodeId);
      }
    }
  }

  /** The node's source line, selected in the editor (a group node, a layer, has none). */
  private async reveal(nodeId: string): Promise<void> {
    const node = this.node(nodeId);
    if (node === undefined) {
      return;
    }
    const { start, end } = node.location.range;
    const range = new vscode.Range(start.line, start.character, end.line, end.character);
    const uri = vscode.Uri.parse(node.location.uri);
    const visible = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === uri.toString());
    const editor = await vscode.window.showTextDocument(uri, {
      viewColumn: visible?.viewColumn ?? this.sourceColumn,
      selection: range,
      preserveFocus: false,
    });
    editor.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
  }
}

export const graphPanel = new GraphPanel();
