/** What the chosen interpreter has: its version and which export packages are missing. */

/** The packages the export worker imports from the user's environment (import names). */
export const EXPORT_PACKAGES = ["torch", "onnx", "onnxscript", "onnxruntime"] as const;

export const MINIMUM_PYTHON: [number, number] = [3, 10];

/** Run with `python -c`: finds modules without importing them (importing torch takes seconds). */
export const PROBE_SCRIPT = [
  "import importlib.util, json, sys",
  `names = ${JSON.stringify(EXPORT_PACKAGES)}`,
  "missing = [n for n in names if importlib.util.find_spec(n) is None]",
  "print(json.dumps({'version': list(sys.version_info[:3]), 'executable': sys.executable, 'missing': missing}))",
].join("\n");

export interface ProbeResult {
  version: number[];
  executable: string;
  missing: string[];
}

export type ProbeVerdict =
  | { kind: "ok" }
  | { kind: "too-old"; message: string }
  | { kind: "missing"; message: string; packages: string[] };

export function parseProbe(stdout: string): ProbeResult {
  const line = stdout.trim().split("\n").pop() ?? "";
  const parsed = JSON.parse(line) as ProbeResult;
  if (!Array.isArray(parsed.version) || !Array.isArray(parsed.missing)) {
    throw new Error(`unexpected answer from the interpreter: ${line}`);
  }
  return parsed;
}

export function judgeProbe(probe: ProbeResult): ProbeVerdict {
  const [major, minor] = probe.version;
  if (major < MINIMUM_PYTHON[0] || (major === MINIMUM_PYTHON[0] && minor < MINIMUM_PYTHON[1])) {
    return {
      kind: "too-old",
      message:
        `onnxlens needs Python ${MINIMUM_PYTHON.join(".")} or newer; ${probe.executable} is ` +
        `${probe.version.join(".")}. Choose another interpreter in the onnxlens.interpreter setting.`,
    };
  }
  if (probe.missing.length > 0) {
    const names = probe.missing.join(", ");
    return {
      kind: "missing",
      packages: [...probe.missing],
      message:
        `onnxlens cannot check models: ${names} ${probe.missing.length === 1 ? "is" : "are"} ` +
        `not installed in ${probe.executable}.`,
    };
  }
  return { kind: "ok" };
}

/** pip's arguments to install what is missing into the interpreter itself. */
export function installArguments(packages: string[]): string[] {
  return ["-m", "pip", "install", ...packages];
}
