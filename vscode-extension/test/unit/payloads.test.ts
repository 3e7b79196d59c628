/**
 * The server's payloads against the extension's interfaces (src/payloads.ts): each sample is
 * what the server's own code sends (tests/lsp/test_payloads.py keeps them current), assigned
 * to the interface the extension reads it with. `tsc --noEmit` (scripts/test.sh) fails when a
 * field the extension needs is missing or has another type; the tests below read them as the
 * extension does.
 */
import { expect, test } from "@playwright/test";
import type {
  ExportAnswer,
  GraphAnswer,
  JobCommandAnswer,
  NodesAt,
  ReportAnswer,
  SarifWritten,
  ServerState,
  WorkspaceChecked,
} from "../../src/payloads";
import { renderRunError, renderRunReport } from "../../src/runView";
import cancelled from "./payloads/cancelled.json";
import exportUnchecked from "./payloads/export-unchecked.json";
import exported from "./payloads/export.json";
import graphNotShown from "./payloads/graph-not-shown.json";
import graph from "./payloads/graph.json";
import jobError from "./payloads/job-error.json";
import jobFailed from "./payloads/job-failed.json";
import nodesAtNone from "./payloads/nodes-at-none.json";
import nodesAt from "./payloads/nodes-at.json";
import notSaved from "./payloads/not-saved.json";
import report from "./payloads/report.json";
import runFailed from "./payloads/run-failed.json";
import run from "./payloads/run.json";
import sarifNotWritten from "./payloads/sarif-not-written.json";
import sarifWritten from "./payloads/sarif-written.json";
import saved from "./payloads/saved.json";
import state from "./payloads/state.json";
import workspaceChecked from "./payloads/workspace-checked.json";

const states: ServerState[] = [state];
const exports: ExportAnswer[] = [exported, exportUnchecked];
const jobs: JobCommandAnswer[] = [run, runFailed, saved, notSaved, jobError, jobFailed, cancelled];
const graphs: GraphAnswer[] = [graph, graphNotShown, cancelled];
const nodes: NodesAt[] = [nodesAt, nodesAtNone];
const reports: ReportAnswer[] = [report];
const sarifs: SarifWritten[] = [sarifWritten, sarifNotWritten];
const workspaces: WorkspaceChecked[] = [workspaceChecked];

test.describe("the server's payloads", () => {
  test("a run answer renders as the run view", () => {
    const answer: JobCommandAnswer = run;
    expect(answer.report).toBeDefined();
    const html = renderRunReport(answer.report!);
    expect(html).toContain("<h1>Model in ONNX Runtime</h1>");
    expect(html).toContain("shape [4] vs PyTorch [3]");
    expect(html).toContain("drawn from random numbers"); // matched by its shape alone
    const failed: JobCommandAnswer = runFailed;
    expect(renderRunError("Model", failed.error!, failed.diagnostics ?? [])).toContain(
      "`aten::i0` has no ONNX translation.",
    );
  });

  test("a save answer says what was written, or why not", () => {
    const ok: JobCommandAnswer = saved;
    expect([ok.saved, ok.written]).toEqual([true, ["/w/Model.onnx", "/w/Model.onnx.data"]]);
    const not: JobCommandAnswer = notSaved;
    expect([not.saved, not.error, not.diagnostics]).toEqual([
      false,
      "the export failed",
      ["`aten::i0` has no ONNX translation."],
    ]);
  });

  test("a graph answer has its page and each node's source range", () => {
    const shown: GraphAnswer = graph;
    expect(shown.url).toMatch(/^http:\/\/127\.0\.0\.1:/);
    const selected = Object.values(shown.nodes ?? {}).find((node) => node.nodeId === shown.selectedNode);
    expect([selected?.opType, selected?.location.range.start]).toEqual(["Erf", { line: 6, character: 15 }]);
    const none: GraphAnswer = graphNotShown;
    expect([none.url, none.error]).toEqual([undefined, "no graph of Model: the export stopped before ONNX"]);
  });

  test("every sample reads as its interface", () => {
    expect(states[0].workerState).toBe("ready");
    expect(exports.map((e) => Object.keys(e.targets))).toEqual([["Model"], []]);
    expect(jobs.filter((j) => j.error !== undefined)).toHaveLength(4);
    expect(graphs.filter((g) => g.cancelled)).toHaveLength(1);
    expect(nodes.map((n) => n.nodes.map((node) => node.nodeId))).toEqual([["node_Erf_1"], []]);
    expect(reports[0].markdown).toContain("✓ exports");
    expect(sarifs.map((s) => s.path ?? s.error)).toEqual(["/w/onnxlens.sarif", "../x.sarif is outside the workspace"]);
    expect([workspaces[0].files, workspaces[0].targets, workspaces[0].problems]).toEqual([2, 3, 1]);
  });
});
