/** What the chosen interpreter has: its version and which export packages are missing. */

/** The packages the export worker imports from the user's environment (import names). */
export const EXPORT_PACKAGES = ["torch", "onnx", "onnxscript", "onnxruntime"] as const;

export const MINIMUM_PYTHON: [number, number] = [3, 10];

/** Run with `python -c` in the extension's folder: finds modules without importing them
 * (importing torch takes seconds), and asks the bundled `exporter/versions.py` (the project's
 * one list of supported torch releases) how to install the missing ones on this platform. */
export const PROBE_SCRIPT = [
  "import importlib.util, json, sys",
  `names = ${JSON.stringify(EXPORT_PACKAGES)}`,
  "missing = [n for n in names if importlib.util.find_spec(n) is None]",
  "sys.path.insert(0, 'bundled/tool')",
  "from exporter.versions import install_plan",
  "plan = install_plan(missing)",
  "print(json.dumps({'version': list(sys.version_info[:3]), 'executable': sys.executable, 'missing': missing,",
  "                  'install': {'commands': plan.commands, 'description': plan.description}}))",
].join("\n");

/** pip argument lists (after `python -m pip`) and what they install, in words. */
export interface InstallPlan {
  commands: string[][];
  description: string;
}

export interface ProbeResult {
  version: number[];
  executable: string;
  missing: string[];
  install: InstallPlan;
}

export type ProbeVerdict =
  | { kind: "ok" }
  | { kind: "too-old"; message: string }
  | { kind: "missing"; message: string; packages: string[]; install: InstallPlan };

export function parseProbe(stdout: string): ProbeResult {
  const line = stdout.trim().split("\n").pop() ?? "";
  const parsed = JSON.parse(line) as ProbeResult;
  if (!Array.isArray(parsed.version) || !Array.isArray(parsed.missing) || !Array.isArray(parsed.install?.commands)) {
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
      install: probe.install,
      message:
        `onnxlens cannot check models: ${names} ${probe.missing.length === 1 ? "is" : "are"} ` +
        `not installed in ${probe.executable}. Install: ${probe.install.description}.`,
    };
  }
  return { kind: "ok" };
}

/** The interpreter's arguments for each pip command of the plan, in order. */
export function installArguments(plan: InstallPlan): string[][] {
  return plan.commands.map((command) => ["-m", "pip", ...command]);
}
