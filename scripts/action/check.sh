#!/usr/bin/env bash
# The GitHub Action's check step (action.yml): one `onnxlens check` prints an annotation per
# finding and appends the step summary (--format github) and, with ONNXLENS_UPLOAD_SARIF=true,
# writes the SARIF log too (--sarif-file). The step itself always succeeds so that the SARIF
# upload still runs; its exit status goes to the step's outputs and a later step fails on it.
set -uo pipefail
: "${GITHUB_OUTPUT:?}"
read -r -a paths <<< "${ONNXLENS_PATHS:-.}"
read -r -a extra <<< "${ONNXLENS_ARGS:-}"
sarif=()
if [ "${ONNXLENS_UPLOAD_SARIF:-false}" = "true" ]; then
    sarif=(--sarif-file "${ONNXLENS_SARIF_FILE:-onnxlens.sarif}"
           --category "${ONNXLENS_CATEGORY:-onnxlens}")
    before="$(mktemp)"  # a SARIF file older than this was not written by this check
fi
onnxlens check "${paths[@]}" --format github "${sarif[@]}" "${extra[@]}"
status=$?
echo "exit-code=$status" >> "$GITHUB_OUTPUT"
if [ "${#sarif[@]}" -gt 0 ]; then
    if [ "${ONNXLENS_SARIF_FILE:-onnxlens.sarif}" -nt "$before" ]; then
        echo "sarif-file=${ONNXLENS_SARIF_FILE:-onnxlens.sarif}" >> "$GITHUB_OUTPUT"
    fi
    rm -f "$before"
fi
exit 0
