/** HTML for the "Run in ONNX Runtime" result (the server's `report` from onnxlens.runModel). */

export interface TensorSummary {
  name: string;
  shape: number[];
  dtype: string;
  values: unknown[];
}

export interface Comparison {
  output: string;
  matched: boolean;
  max_abs?: number;
  max_rel?: number;
  atol?: number;
  rtol?: number;
  reason?: string;
}

export interface RunReport {
  target: string;
  model: string;
  inputs: TensorSummary[];
  outputs: TensorSummary[];
  comparison: Comparison[];
  matched: boolean;
  latency: { runs: number; p50_ms: number; p90_ms: number; mean_ms: number; [key: string]: number };
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string);
}

function number(value: unknown): string {
  if (typeof value !== "number") {
    return escapeHtml(String(value));
  }
  if (Number.isInteger(value)) {
    return String(value);
  }
  const magnitude = Math.abs(value);
  return magnitude !== 0 && (magnitude < 1e-3 || magnitude >= 1e5)
    ? value.toExponential(2)
    : String(Number(value.toPrecision(4)));
}

function shape(dims: number[]): string {
  return dims.length ? dims.join(" × ") : "scalar";
}

function tensorTable(title: string, tensors: TensorSummary[]): string {
  const rows = tensors
    .map((t) => `<tr><td><code>${escapeHtml(t.name)}</code></td><td>${shape(t.shape)}</td>` +
      `<td>${escapeHtml(t.dtype)}</td><td>${t.values.map(number).join(", ")}</td></tr>`)
    .join("");
  return `<h2>${title}</h2><table><thead><tr><th>name</th><th>shape</th><th>dtype</th>` +
    `<th>first values</th></tr></thead><tbody>${rows}</tbody></table>`;
}

function comparisonTable(entries: Comparison[]): string {
  const rows = entries
    .map((c) => {
      const verdict = c.matched ? `<span class="ok">✓ matches</span>` : `<span class="bad">✗ differs</span>`;
      const detail = c.reason !== undefined
        ? `<td colspan="2">${escapeHtml(c.reason)}</td>`
        : `<td>${number(c.max_abs)}</td><td>${number(c.max_rel)}</td>`;
      const tolerance = c.atol !== undefined ? `atol ${number(c.atol)}, rtol ${number(c.rtol)}` : "";
      return `<tr><td><code>${escapeHtml(c.output)}</code></td><td>${verdict}</td>${detail}<td>${tolerance}</td></tr>`;
    })
    .join("");
  return `<h2>Compared with PyTorch</h2><table><thead><tr><th>output</th><th>result</th>` +
    `<th>max abs diff</th><th>max rel diff</th><th>tolerance</th></tr></thead><tbody>${rows}</tbody></table>`;
}

const STYLE = `body{font-family:var(--vscode-font-family);color:var(--vscode-foreground);padding:0 1em}
table{border-collapse:collapse;margin-bottom:1em}td,th{border:1px solid var(--vscode-panel-border,#8884);padding:2px 8px;text-align:left}
.ok{color:var(--vscode-testing-iconPassed,#3a3)}.bad{color:var(--vscode-errorForeground,#d33)}`;

/** A complete page for a webview: no scripts, inline styles only, VS Code's theme colours. */
export function htmlPage(title: string, body: string): string {
  return `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">` +
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline';">` +
    `<title>${escapeHtml(title)}</title><style>${STYLE}</style></head><body>${body}</body></html>`;
}

export function renderRunReport(report: RunReport): string {
  const verdict = report.matched
    ? `<p class="ok" id="verdict">✓ ONNX Runtime matches PyTorch</p>`
    : `<p class="bad" id="verdict">✗ ONNX Runtime differs from PyTorch</p>`;
  const latency = report.latency;
  const body = `<h1>${escapeHtml(report.target)} in ONNX Runtime</h1>${verdict}` +
    `<p>Model: ${escapeHtml(report.model)}</p>` +
    tensorTable("Inputs", report.inputs) + tensorTable("Outputs", report.outputs) +
    comparisonTable(report.comparison) +
    `<h2>Latency</h2><p id="latency">p50 ${latency.p50_ms.toFixed(3)} ms · p90 ${latency.p90_ms.toFixed(3)} ms · ` +
    `mean ${latency.mean_ms.toFixed(3)} ms over ${latency.runs} runs</p>`;
  return htmlPage(`${report.target} in ONNX Runtime`, body);
}

export function renderRunError(target: string, error: string, diagnostics: string[]): string {
  const items = diagnostics.map((d) => `<li>${escapeHtml(d)}</li>`).join("");
  const body = `<h1>${escapeHtml(target)} in ONNX Runtime</h1><p class="bad" id="verdict">✗ ${escapeHtml(error)}</p>` +
    (items ? `<h2>Problems</h2><ul>${items}</ul>` : "");
  return htmlPage(`${target} in ONNX Runtime`, body);
}
