/**
 * A real VS Code (code-server) with the packaged onnxlens extension installed, serving one
 * workspace, and the teardown that leaves no process behind.
 */
import { ChildProcess, execFileSync, spawn } from "child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "fs";
import { createServer } from "net";
import * as os from "os";
import * as path from "path";
import { alive, descendants } from "./processes";

export const EXTENSION_DIR = path.resolve(__dirname, "..");
export const REPO = path.resolve(EXTENSION_DIR, "..");
export const VSIX = path.join(EXTENSION_DIR, "dist", "onnxlens.vsix");

/** Where tools/code-server/install.sh put code-server (the test script exports it). */
function codeServerDir(): string {
  const cache = process.env.ONNXLENS_CACHE_DIR ?? path.join(os.homedir(), ".cache", "onnxlens");
  const dir = process.env.ONNXLENS_CODE_SERVER ?? path.join(cache, "code-server-4.100.3");
  if (!existsSync(path.join(dir, "out", "node", "entry.js"))) {
    throw new Error(`no code-server in ${dir}: run the tests with vscode-extension/scripts/test.sh`);
  }
  return dir;
}

function python(): string {
  return process.env.ONNXLENS_PYTHON ?? path.join(REPO, ".venv", "bin", "python");
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

export interface CodeServer {
  url: string;
  workspace: string;
  process: ChildProcess;
  /** Everything it started, recorded before teardown. */
  seen: Set<number>;
  home: string;
  /** The user settings file; code-server picks up edits to it while running. */
  settingsFile: string;
}

const USER_SETTINGS = {
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "workbench.enableExperiments": false,
  "telemetry.telemetryLevel": "off",
  "update.mode": "none",
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "extensions.ignoreRecommendations": true,
  "security.workspace.trust.startupPrompt": "always",
  "security.workspace.trust.untrustedFiles": "open",
  "chat.disableAIFeatures": true,
  "editor.codeLens": true,
  "editor.hover.delay": 200,
  "files.autoSave": "off",
  "window.commandCenter": false,
  "workbench.layoutControl.enabled": false,
  // no fade-ins: a screenshot shows a toast or a widget as the user reads it
  "workbench.reduceMotion": "on",
};

/**
 * Start code-server on a copy of `source` (so fixes applied by tests never touch the repo).
 * `prepare` may set up files in the test's home directory and returns more user settings.
 * `workspaceFile`: open this `.code-workspace` of the copy (a multi-root workspace) instead of
 * the copy as a folder.
 */
export async function startCodeServer(
  source: string,
  extraSettings: Record<string, unknown> = {},
  prepare: (home: string) => Record<string, unknown> = () => ({}),
  workspaceFile?: string,
): Promise<CodeServer> {
  const home = mkdtempSync(path.join(os.tmpdir(), "onnxlens-e2e-"));
  const preparedSettings = prepare(home);
  const workspace = path.join(home, path.basename(source));
  cpSync(source, workspace, { recursive: true, filter: (p) => !p.includes("__pycache__") });
  const userData = path.join(home, "user-data");
  const extensions = path.join(home, "extensions");
  mkdirSync(path.join(userData, "User"), { recursive: true });
  writeFileSync(path.join(userData, "User", "settings.json"),
    JSON.stringify({ ...USER_SETTINGS, "onnxlens.interpreter": python(), ...extraSettings, ...preparedSettings },
      null, 2));
  const entry = path.join(codeServerDir(), "out", "node", "entry.js");
  // Its own config file, so nothing is written to the user's ~/.config/code-server.
  const common = ["--user-data-dir", userData, "--extensions-dir", extensions,
    "--config", path.join(home, "code-server.yaml")];
  execFileSync("node", [entry, ...common, "--install-extension", VSIX], { stdio: "pipe", timeout: 120000 });
  const port = await freePort();
  const child = spawn("node", [entry, "--auth", "none", "--bind-addr", `127.0.0.1:${port}`, "--disable-telemetry",
    "--disable-update-check", ...common, workspace], {
    detached: true, // its own process group, so teardown reaches everything it starts
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, HOME: home, XDG_CONFIG_HOME: path.join(home, ".config") },
  });
  const log: string[] = [];
  child.stdout?.on("data", (chunk) => log.push(String(chunk)));
  child.stderr?.on("data", (chunk) => log.push(String(chunk)));
  // a folder, or a multi-root workspace: the `.code-workspace` file in the copy that names its folders
  const url = workspaceFile === undefined
    ? `http://127.0.0.1:${port}/?folder=${encodeURIComponent(workspace)}`
    : `http://127.0.0.1:${port}/?workspace=${encodeURIComponent(path.join(workspace, workspaceFile))}`;
  const deadline = Date.now() + 60000;
  for (;;) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (response.ok) {
        break;
      }
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      throw new Error(`code-server did not start:\n${log.join("")}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  const settingsFile = path.join(userData, "User", "settings.json");
  return { url, workspace, process: child, seen: new Set(), home, settingsFile };
}

/** Remember the server's descendants now, so teardown can prove each one is gone. */
export function recordProcesses(server: CodeServer): ReturnType<typeof descendants> {
  const found = server.process.pid ? descendants(server.process.pid) : [];
  for (const info of found) {
    server.seen.add(info.pid);
  }
  return found;
}

/** Stop code-server and everything it started; returns the pids that had to be killed hard. */
export async function stopCodeServer(server: CodeServer): Promise<number[]> {
  recordProcesses(server);
  const pid = server.process.pid;
  if (pid !== undefined && alive(pid)) {
    try {
      process.kill(-pid, "SIGTERM");
    } catch {
      // the group is gone already
    }
  }
  const deadline = Date.now() + 15000;
  const remaining = () => [...server.seen, ...(pid ? [pid] : [])].filter(alive);
  while (remaining().length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
  }
  const stubborn = remaining();
  for (const leftover of stubborn) {
    try {
      process.kill(leftover, "SIGKILL");
    } catch {
      // exited meanwhile
    }
  }
  await new Promise((r) => setTimeout(r, 300));
  rmSync(server.home, { recursive: true, force: true });
  return stubborn;
}

/** Change the workspace's settings (.vscode/settings.json) while code-server runs. */
export function updateWorkspaceSettings(server: CodeServer, changes: Record<string, unknown>): void {
  const file = path.join(server.workspace, ".vscode", "settings.json");
  mkdirSync(path.dirname(file), { recursive: true });
  const current = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>) : {};
  writeFileSync(file, JSON.stringify({ ...current, ...changes }, null, 2));
}

/** The pid of the running onnxlens language server, if there is exactly one. */
export function languageServerPid(server: CodeServer): number | undefined {
  const servers = recordProcesses(server).filter((p) => p.command.includes("onnxlens_server.py"));
  return servers.length === 1 ? servers[0].pid : undefined;
}

export function stillAlive(server: CodeServer): number[] {
  return [...server.seen].filter(alive);
}
