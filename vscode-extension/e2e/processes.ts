/** Process-tree helpers on Linux /proc: the end-to-end tests account for every process. */
import { readdirSync, readFileSync } from "fs";

interface ProcessInfo {
  pid: number;
  ppid: number;
  command: string;
}

function read(pid: number): ProcessInfo | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name may hold spaces and parentheses: the fields after the last ")" are fixed.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (fields[0] === "Z") {
      return undefined; // a zombie is gone already, its parent just has not reaped it
    }
    const command = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim();
    return { pid, ppid: Number(fields[1]), command };
  } catch {
    return undefined;
  }
}

export function allProcesses(): ProcessInfo[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map((name) => read(Number(name)))
    .filter((info): info is ProcessInfo => info !== undefined);
}

/** Every living descendant of `root` (not `root` itself). */
export function descendants(root: number): ProcessInfo[] {
  const all = allProcesses();
  const found: ProcessInfo[] = [];
  const parents = new Set([root]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const info of all) {
      if (parents.has(info.ppid) && !parents.has(info.pid)) {
        parents.add(info.pid);
        found.push(info);
        grew = true;
      }
    }
  }
  return found;
}

export function alive(pid: number): boolean {
  return read(pid) !== undefined;
}
