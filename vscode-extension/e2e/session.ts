/** One VS Code session per spec file: code-server on a copy of examples/, a browser page with
 * the workbench loaded and the trust question answered, and a teardown that proves every
 * process code-server started is gone. */
import { expect, Page, test } from "@playwright/test";
import * as path from "path";
import { CodeServer, REPO, startCodeServer, stillAlive, stopCodeServer } from "./codeServer";
import { openWorkbench } from "./workbench";

export interface Session {
  server: CodeServer;
  page: Page;
}

/**
 * Registers the spec's beforeAll/afterAll; the returned object is filled in by beforeAll.
 * The workspace is a copy of `source` (default: the repository's examples), with `settings`;
 * `workspaceFile`: a `.code-workspace` in it to open as a multi-root workspace.
 */
export function vscodeSession(
  trust: boolean,
  prepare?: (home: string) => Record<string, unknown>,
  source: string = path.join(REPO, "examples"),
  settings: Record<string, unknown> = {},
  workspaceFile?: string,
): Session {
  const session = {} as Session;
  test.beforeAll(async ({ browser }) => {
    session.server = await startCodeServer(source, settings, prepare, workspaceFile);
    session.page = await browser.newPage();
    await openWorkbench(session.page, session.server.url, trust);
  });
  test.afterAll(async () => {
    await session.page?.close();
    if (session.server) {
      await stopCodeServer(session.server);
      expect(stillAlive(session.server), "processes left behind by code-server").toEqual([]);
    }
  });
  return session;
}
