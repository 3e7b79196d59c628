import { execFileSync } from "child_process";
import { existsSync } from "fs";
import * as path from "path";
import { describe, expect, it } from "vitest";

const VSIX = path.join(__dirname, "..", "..", "dist", "onnxlens.vsix");

/** The .vsix's file names, read with Python's zipfile (no zip library needed). */
function contents(): string[] {
  const listing = execFileSync("python3", ["-c",
    "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))", VSIX], { encoding: "utf8" });
  return listing.trim().split("\n");
}

describe.runIf(existsSync(VSIX) || process.env.CI)("the packaged .vsix", () => {
  const files = existsSync(VSIX) ? contents() : [];

  it("carries the bundled extension and its manifest", () => {
    expect(files).toContain("extension/dist/extension.js");
    expect(files).toContain("extension/package.json");
    expect(files).toContain("extension.vsixmanifest");
  });

  it("carries the server's Python code and the launcher", () => {
    for (const file of ["tool/onnxlens_server.py", "tool/lsp_server/server.py", "tool/lsp_server/worker_main.py",
      "tool/exporter/pipeline.py", "tool/exporter/sarif.py"]) {
      expect(files).toContain(`extension/bundled/${file}`);
    }
  });

  it("carries the pure-Python libraries the server imports", () => {
    for (const library of ["pygls", "lsprotocol", "sarif_om", "cattrs", "attrs", "attr", "tomli", "exceptiongroup"]) {
      expect(files.some((f) => f.startsWith(`extension/bundled/libs/${library}/`))).toBe(true);
    }
    expect(files).toContain("extension/bundled/libs/typing_extensions.py");
  });

  it("has no compiled code, caches, node_modules, sources or tests", () => {
    expect(files.filter((f) => /\.(so|pyd|pyc)$|__pycache__/.test(f))).toEqual([]);
    expect(files.filter((f) => f.includes("node_modules/"))).toEqual([]);
    expect(files.filter((f) => f.startsWith("extension/src/") || f.endsWith(".ts"))).toEqual([]);
    expect(files.filter((f) => /(^|\/)(tests?|e2e)\//.test(f) || /test_[^/]*\.py$|\.test\.js$/.test(f))).toEqual([]);
  });
});
