import { defineConfig } from "@playwright/test";

// The unit tests use Playwright Test as a plain test runner: no browser, no VS Code.
export default defineConfig({
  testDir: ".",
  testMatch: /.*\.test\.ts/,
  reporter: [["list"]],
  outputDir: "../../test-results/unit",
});
