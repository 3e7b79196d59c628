import { expect, test } from "@playwright/test";
import { renderRunError, renderRunReport, RunReport } from "../../src/runView";

const report: RunReport = {
  target: "MLP",
  model: "in-memory export",
  inputs: [{ name: "x", shape: [2, 16], dtype: "float32", values: [0.5, -1.25] }],
  outputs: [{ name: "linear_1", shape: [2, 4], dtype: "float32", values: [0.123456, 2] }],
  comparison: [{ output: "linear_1", matched: true, max_abs: 1.2e-7, max_rel: 3e-6, atol: 1e-5, rtol: 1e-3 }],
  matched: true,
  latency: { runs: 20, p50_ms: 0.0412, p90_ms: 0.05, mean_ms: 0.044, min_ms: 0.04 },
};

test.describe("renderRunReport", () => {
  test("shows outputs with shapes and dtypes, the comparison and the latency percentiles", () => {
    const html = renderRunReport(report);
    expect(html).toContain("<h1>MLP in ONNX Runtime</h1>");
    expect(html).toContain("✓ ONNX Runtime matches PyTorch");
    expect(html).toContain("<td><code>linear_1</code></td><td>2 × 4</td><td>float32</td><td>0.1235, 2</td>");
    expect(html).toContain("p50 0.041 ms · p90 0.050 ms · mean 0.044 ms over 20 runs");
    expect(html).toContain("atol 1.00e-5, rtol 0.001");
  });

  test("says when ONNX Runtime differs, with the reason", () => {
    const html = renderRunReport({ ...report, matched: false,
      comparison: [{ output: "y", matched: false, reason: "shape [2] vs PyTorch [3]" }] });
    expect(html).toContain("✗ ONNX Runtime differs from PyTorch");
    expect(html).toContain("shape [2] vs PyTorch [3]");
  });

  test("escapes names from the user's model", () => {
    const html = renderRunReport({ ...report, target: "<script>alert(1)</script>" });
    expect(html).not.toContain("<script>alert");
    expect(html).toContain("&lt;script&gt;");
  });

  test("allows no scripts in the view", () => {
    expect(renderRunReport(report)).toContain("default-src 'none'");
  });
});

test.describe("renderRunError", () => {
  test("shows why the model could not run and the problems found", () => {
    const html = renderRunError("Net", "the export failed (translate)", ["ONNX201: aten::foo has no translation"]);
    expect(html).toContain("✗ the export failed (translate)");
    expect(html).toContain("<li>ONNX201: aten::foo has no translation</li>");
  });
});
