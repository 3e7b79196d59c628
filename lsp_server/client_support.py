"""What the client supports, read once from its capabilities at ``initialize`` (LSP 3.17):
the handlers ask this instead of walking ``ClientCapabilities`` each time."""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types


@dataclass(frozen=True)
class ClientSupport:
    related_information: bool = False  # publishDiagnostics.relatedInformation
    code_description: bool = False  # publishDiagnostics.codeDescriptionSupport
    diagnostic_versions: bool = False  # publishDiagnostics.versionSupport
    markdown_hover: bool = False  # hover.contentFormat holds markdown
    code_action_literals: bool = False  # else actions travel as commands (onnxlens.applyEdit)
    work_done_progress: bool = False  # window.workDoneProgress
    code_lens_refresh: bool = False  # workspace.codeLens.refreshSupport
    configuration: bool = False  # workspace/configuration
    show_document: bool = False  # window/showDocument (the graph page in the browser)

    @classmethod
    def of(cls, capabilities: types.ClientCapabilities) -> ClientSupport:
        document = capabilities.text_document
        publish = document.publish_diagnostics if document else None
        hover = document.hover if document else None
        action = document.code_action if document else None
        workspace = capabilities.workspace
        return cls(
            related_information=bool(publish and publish.related_information),
            code_description=bool(publish and publish.code_description_support),
            diagnostic_versions=bool(publish and publish.version_support),
            markdown_hover=bool(hover and hover.content_format
                                and types.MarkupKind.Markdown in hover.content_format),
            code_action_literals=bool(action and action.code_action_literal_support),
            work_done_progress=bool(capabilities.window
                                    and capabilities.window.work_done_progress),
            code_lens_refresh=bool(workspace and workspace.code_lens
                                   and workspace.code_lens.refresh_support),
            configuration=bool(workspace and workspace.configuration),
            show_document=bool(capabilities.window and capabilities.window.show_document
                               and capabilities.window.show_document.support),
        )
