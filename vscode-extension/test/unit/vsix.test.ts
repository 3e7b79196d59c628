import { execFileSync } from "child_process";
import { existsSync } from "fs";
import * as path from "path";
import { expect, test } from "@playwright/test";

const VSIX = path.join(__dirname, "..", "..", "dist", "onnxlens.vsix");

/** The .vsix's file names, read with Python's zipfile (no zip library needed). */
function contents(): string[] {
  const listing = execFileSync("python3", ["-c",
    "import sys, zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))", VSIX], { encoding: "utf8" });
  return listing.trim().split("\n");
}

test.describe("the packaged .vsix", () => {
  // scripts/test.sh builds it first; on CI a missing .vsix is a failure, not a skip.
  test.skip(!existsSync(VSIX) && !process.env.CI, "no .vsix: run scripts/package.sh");
  const files = existsSync(VSIX) ? contents() : [];

  test("carries the bundled extension and its manifest", () => {
    expect(files).toContain("extension/dist/extension.js");
    expect(files).toContain("extension/package.json");
    expect(files).toContain("extension.vsixmanifest");
  });

  test("carries the server's Python code and the launcher", () => {
    for (const file of ["tool/onnxlens_server.py", "tool/lsp_server/server.py", "tool/export_worker/process.py",
      "tool/exporter/pipeline/runner.py", "tool/exporter/reports/sarif.py",
      // the rule pages a rule id in the Problems panel opens (exporter/findings/rule_docs links docs/rules)
      "tool/exporter/findings/rule_docs/ONNX201.md", "tool/exporter/findings/rule_docs/ONNX006.md"]) {
      expect(files).toContain(`extension/bundled/${file}`);
    }
  });

  test("carries the pure-Python libraries the server imports", () => {
    for (const library of ["pygls", "lsprotocol", "sarif_om", "cattrs", "attrs", "attr", "tomli", "exceptiongroup"]) {
      expect(files.some((f) => f.startsWith(`extension/bundled/libs/${library}/`))).toBe(true);
    }
    expect(files).toContain("extension/bundled/libs/typing_extensions.py");
  });

  test("has no compiled code, caches, node_modules, sources or tests", () => {
    expect(files.filter((f) => /\.(so|pyd|pyc)$|__pycache__/.test(f))).toEqual([]);
    expect(files.filter((f) => f.includes("node_modules/"))).toEqual([]);
    expect(files.filter((f) => f.startsWith("extension/src/") || f.endsWith(".ts"))).toEqual([]);
    expect(files.filter((f) => /(^|\/)(tests?|e2e)\//.test(f) || /test_[^/]*\.py$|\.test\.js$/.test(f))).toEqual([]);
  });
});
