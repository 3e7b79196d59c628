/** The status-bar item's look, as a pure function of what the extension knows. */

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

export interface StatusView {
  text: string;
  tooltip: string;
  /** The command a click runs. */
  command: string;
  /** A warning or error background, as VS Code's theme colours name them. */
  background?: "statusBarItem.warningBackground" | "statusBarItem.errorBackground";
}

export const SHOW_OUTPUT = "onnxlens.showOutput";
export const SHOW_PROBLEMS = "workbench.actions.view.problems";
export const MANAGE_TRUST = "workbench.trust.manage";

export function statusView(state: StatusInputs): StatusView {
  if (state.server === "failed" || state.server === "stopped") {
    return {
      text: "$(error) ONNX: server stopped",
      tooltip: "The onnxlens language server is not running. Click for its output.",
      command: SHOW_OUTPUT,
      background: "statusBarItem.errorBackground",
    };
  }
  if (state.server === "starting") {
    return { text: "$(loading~spin) ONNX", tooltip: "onnxlens is starting", command: SHOW_OUTPUT };
  }
  if (!state.trusted) {
    return {
      text: "$(shield) ONNX: restricted",
      tooltip: "This workspace is not trusted, so onnxlens runs no model code. Click to manage trust.",
      command: MANAGE_TRUST,
    };
  }
  if (state.missing.length > 0 || state.workerState === "missing" || state.workerState === "down") {
    const why = state.missing.length > 0 ? `${state.missing.join(", ")} missing` : "the export worker is down";
    return {
      text: "$(warning) ONNX: worker down",
      tooltip: `onnxlens cannot check models: ${why}. Click for the output.`,
      command: SHOW_OUTPUT,
      background: "statusBarItem.warningBackground",
    };
  }
  if (state.checking > 0 || state.workerState === "starting") {
    const what = state.checking > 0 ? `checking ${state.checking} file${state.checking === 1 ? "" : "s"}` : "starting the export worker";
    return { text: "$(sync~spin) ONNX: checking", tooltip: `onnxlens is ${what}`, command: SHOW_OUTPUT };
  }
  if (state.problems > 0) {
    return {
      text: `$(error) ONNX: ${state.problems} problem${state.problems === 1 ? "" : "s"}`,
      tooltip: "ONNX export problems found. Click to open the Problems panel.",
      command: SHOW_PROBLEMS,
    };
  }
  return { text: "$(check) ONNX", tooltip: "onnxlens: no ONNX export problems", command: SHOW_PROBLEMS };
}
