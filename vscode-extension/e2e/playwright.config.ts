import { defineConfig } from "@playwright/test";

export default defineConfig({
  testDir: ".",
  testMatch: /.*\.spec\.ts/,
  // One VS Code at a time: each spec starts its own code-server and language server.
  workers: 1,
  fullyParallel: false,
  retries: 0,
  timeout: 240_000,
  expect: { timeout: 90_000 },
  reporter: [["list"]],
  outputDir: "../test-results",
  use: {
    browserName: "chromium",
    viewport: { width: 1400, height: 900 },
    actionTimeout: 30_000,
    launchOptions: {
      executablePath: process.env.ONNXLENS_CHROMIUM ?? "/usr/bin/chromium",
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"],
    },
  },
});
