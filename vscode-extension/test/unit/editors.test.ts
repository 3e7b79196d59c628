import { expect, test } from "@playwright/test";
import { editorsNotification } from "../../src/editors";

test.describe("editorsNotification", () => {
  test("names the active document and each visible one once", () => {
    expect(editorsNotification("file:///w/a.py", ["file:///w/a.py", "file:///w/b.py", "file:///w/a.py"]))
      .toEqual({ active: "file:///w/a.py", visible: ["file:///w/a.py", "file:///w/b.py"] });
  });

  test("says null when no editor is active", () => {
    expect(editorsNotification(undefined, [])).toEqual({ active: null, visible: [] });
  });
});
