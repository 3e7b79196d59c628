/**
 * The server's queue checks the document in front of the user first: it learns which editors
 * are active and visible from the `onnxlens/editors` notification (lsp_server/documents.py).
 */

/** What the notification carries: document URIs as the language client sends them. */
export interface EditorsNotification {
  active: string | null;
  visible: string[];
}

/** The active editor's document and every visible editor's document, each once. */
export function editorsNotification(
  active: string | undefined,
  visible: readonly string[],
): EditorsNotification {
  return { active: active ?? null, visible: [...new Set(visible)] };
}
