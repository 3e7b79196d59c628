/**
 * The language status item's look (the `{}` entry beside the language mode when a Python file
 * or notebook cell is in front), as a pure function of what the extension knows.
 */

export type ServerPhase = "starting" | "running" | "stopped" | "failed";

export interface StatusInputs {
  server: ServerPhase;
  trusted: boolean;
  /** From the server's `onnxlens/state`: stopped, starting, ready, missing or down. */
  workerState: string;
  /** Documents being checked now. */
  checking: number;
  /** onnxlens diagnostics in the Problems panel. */
  problems: number;
  /** Export packages the interpreter lacks (from the probe). */
  missing: string[];
}

/** `vscode.LanguageStatusSeverity`'s values, without importing `vscode` (unit tests run in Node). */
export type StatusSeverity = "information" | "warning" | "error";

export interface StatusView {
  text: string;
  /** Shown after the text in the language status hover. */
  detail: string;
  severity: StatusSeverity;
  /** A spinner instead of the `{}` icon. */
  busy: boolean;
  /** The link the hover offers: its title and the command it runs. */
  command: { title: string; command: string };
}

export const SHOW_OUTPUT = "onnxlens.showOutput";
export const SHOW_PROBLEMS = "workbench.actions.view.problems";
export const MANAGE_TRUST = "workbench.trust.manage";

const OUTPUT = { title: "Output", command: SHOW_OUTPUT };
const PROBLEMS = { title: "Problems", command: SHOW_PROBLEMS };

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

export function statusView(state: StatusInputs): StatusView {
  const view = { severity: "information" as StatusSeverity, busy: false };
  if (state.server === "failed" || state.server === "stopped") {
    return { ...view, text: "ONNX: server stopped", detail: "the onnxlens language server is not running",
      severity: "error", command: OUTPUT };
  }
  if (state.server === "starting") {
    return { ...view, text: "ONNX: starting", detail: "onnxlens is starting", busy: true, command: OUTPUT };
  }
  if (!state.trusted) {
    return { ...view, text: "ONNX: restricted",
      detail: "this workspace is not trusted, so onnxlens runs no model code",
      command: { title: "Manage Trust", command: MANAGE_TRUST } };
  }
  if (state.missing.length > 0 || state.workerState === "missing" || state.workerState === "down") {
    const why = state.missing.length > 0 ? `${state.missing.join(", ")} missing` : "the export worker is down";
    return { ...view, text: "ONNX: worker down", detail: `onnxlens cannot check models: ${why}`,
      severity: "warning", command: OUTPUT };
  }
  if (state.checking > 0 || state.workerState === "starting") {
    const what = state.checking > 0 ? `checking ${plural(state.checking, "file")}` : "starting the export worker";
    return { ...view, text: "ONNX: checking", detail: what, busy: true, command: OUTPUT };
  }
  if (state.problems > 0) {
    return { ...view, text: `ONNX: ${plural(state.problems, "problem")}`, detail: "ONNX export problems found",
      command: PROBLEMS };
  }
  return { ...view, text: "ONNX: no problems", detail: "no ONNX export problems", command: PROBLEMS };
}

/**
 * onnxlens's diagnostics per document, updated only for the documents a change names (not a
 * scan of every diagnostic in the workspace on each change).
 */
export class ProblemCount {
  private readonly counts = new Map<string, number>();
  private sum = 0;

  /** Record ``count`` onnxlens diagnostics for ``uri``; the new total. */
  set(uri: string, count: number): number {
    this.sum += count - (this.counts.get(uri) ?? 0);
    if (count === 0) {
      this.counts.delete(uri);
    } else {
      this.counts.set(uri, count);
    }
    return this.sum;
  }

  get total(): number {
    return this.sum;
  }
}
