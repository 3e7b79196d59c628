/**
 * What the server sends beyond LSP's own types: its notifications and its commands' answers,
 * as `lsp_server/payloads.py` types them (a field the server leaves out is optional here).
 * `test/unit/payloads.test.ts` assigns JSON samples the server's own code made
 * (`tests/lsp/test_payloads.py` keeps them current) to these interfaces: the type check fails
 * when the two sides drift apart.
 */
import type { GraphPayload } from "./graphPanel";
import type { RunReport } from "./runView";

export type { GraphNode, GraphPayload, LspRange } from "./graphPanel";
export type { RunReport } from "./runView";

/** `onnxlens/state`: what the status item shows. */
export interface ServerState {
  trusted: boolean;
  workerState: string;
  checking: string[];
}

/** `onnxlens.export`: the document checked now, each target's verdict. */
export interface ExportAnswer {
  uri: string;
  version?: number;
  targets: Record<string, { ok: boolean; problems: number }>;
}

/** `onnxlens.checkWorkspace`: what the workspace check found. */
export interface WorkspaceChecked {
  files: number;
  targets: number;
  problems: number;
}

/** `onnxlens.showReport`: the targets' reports, for a reader. */
export interface ReportAnswer {
  markdown: string;
  cancelled?: boolean;
}

/** `onnxlens.writeSarif`: where the log went, or why it was not written. */
export interface SarifWritten {
  path?: string;
  error?: string;
}

/** `onnxlens.saveModel` and `onnxlens.runModel`: what the job did, or why not. */
export interface JobCommandAnswer {
  diagnostics?: string[];
  saved?: boolean;
  written?: string[];
  report?: RunReport;
  markdown?: string;
  error?: string;
  cancelled?: boolean;
}

/** `onnxlens.graphNodesAt`: the nodes of the document's last graph a line produced. */
export interface NodesAt {
  uri: string;
  target?: string;
  graphId?: string;
  nodes: Array<{ key: string; nodeId: string; graphId: string; opType: string }>;
}

/** `onnxlens.showGraph`'s answer and `onnxlens/graphChanged`. */
export type GraphAnswer = GraphPayload;
