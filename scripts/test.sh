#!/usr/bin/env bash
# Run every test: installs what the tests need (Python packages, the SARIF tools and viewer,
# npm packages, code-server, Chromium), checks ruff, mypy and the import contracts (settings in
# pyproject.toml), runs pytest on the primary torch, then the tests that depend on torch
# (marked `every_torch` in tests/conftest.py) again on every other tested torch
# (exporter/versions.py; each in a venv of its own that scripts/setup.sh installs) with the
# VS Code extension's tests beside them; at the end, how long each part took. Extra arguments
# go to pytest.
# pytest runs in ONNXLENS_TEST_WORKERS processes (pytest-xdist; default: one more than the
# cores, each test module in one process so that its server and fixtures start once; 0 runs
# in-process).
# ONNXLENS_SKIP_OTHER_TORCH=1 leaves the other torches out (e.g. while working on one part).
# ONNXLENS_TEST_REPORTS=DIR: each leg also writes its JUnit XML (every test's duration) to
# DIR/pytest-torch<version>.xml and the CPU each test used to DIR/cpu-torch<version>/
# (`python -m tests.cpu_usage DIR/cpu-torch<version>` sums it by module), for whoever makes
# the run faster next.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${ONNXLENS_VENV:-$repo/.venv}"
logs="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$logs"' EXIT  # a background step left running
timings=()
phase_done() { timings+=("$1 $(( SECONDS - phase_started )) s"); phase_started=$SECONDS; }
phase_started=$SECONDS

# torch's OpenMP threads (and MKL's) spin while they wait for work. With more processes than
# cores running torch at once (the pytest workers, the corpus's truth beside onnxlens) the
# spinning took the cores from the processes with work: a torchvision check beside the
# corpus's truth took 116 s instead of 27 (CONTRIBUTING.md). Passive waiting changes how
# idle threads wait, not what they compute.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# One intra-op thread per torch process: the run keeps more processes busy than there are
# cores (three pytest workers, their export workers' jobs, the corpus's truth, the next leg's
# installs), so a second thread only waits for a core and for its sibling at every parallel
# region. Threads change how fast a check runs, not what it computes (the corpus's truth and
# onnxlens run alike); tests that need a thread pool set their own (tests/export_worker).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

bash "$repo/scripts/setup.sh"
cd "$repo"
# The SARIF viewer that tests/onnxlens/test_sarif_viewer.py renders onnxlens's SARIF in (npm
# packages, and Debian's Chromium when missing): before the background steps below, so that
# its apt-get never runs beside code-server's (apt takes a lock and fails the second).
bash "$repo/tools/sarif-viewer/install.sh" >/dev/null
phase_done "setup"

# What the later legs install (the other torches' venvs, the extension's npm packages, its
# .vsix and unit tests, code-server and Chromium) is prepared in the background while the
# primary torch's tests run: mostly downloads and disk, so the tests lose little to it.
primary="$(python3 exporter/versions.py primary)"
others=()
if [ "${ONNXLENS_SKIP_OTHER_TORCH:-0}" != "1" ] && [ -z "${ONNXLENS_VENV:-}" ]; then
    for torch_version in $(python3 exporter/versions.py tested); do
        [ "$torch_version" != "$primary" ] && others+=("$torch_version")
    done
fi
# One after another (each is gigabytes of downloads and unpacking), but each leg waits only for
# its own venv: on a fresh machine the first other torch's tests start while the next one
# still installs.
declare -A prepared  # torch version -> the pid of the background step that installs it
previous_install=""
for torch_version in "${others[@]}"; do
    (
        if [ -n "$previous_install" ]; then
            # not `wait`: that works only for the shell's own children
            while kill -0 "$previous_install" 2>/dev/null; do sleep 2; done
        fi
        ONNXLENS_TORCH="$torch_version" bash "$repo/scripts/setup.sh"
    ) >"$logs/others-$torch_version" 2>&1 &
    prepared[$torch_version]=$!
    previous_install=$!
done
extension=1
[ "${ONNXLENS_SKIP_EXTENSION:-0}" = "1" ] && extension=0
if [ "$extension" = 1 ]; then
    ONNXLENS_EXTENSION_STEPS=prepare bash "$repo/vscode-extension/scripts/test.sh" \
        >"$logs/extension" 2>&1 &
    extension_job=$!
fi

bash "$repo/tools/sarif/install.sh" >/dev/null
# ONNX Runtime Web for the deploy stage's `ort-web` (tests/exporter/pipeline/test_deploy.py)
bash "$repo/tools/ort-web/install.sh" >/dev/null
"$venv/bin/ruff" check .
"$venv/bin/python" -m mypy
"$venv/bin/lint-imports" --no-cache  # the import contracts: [tool.importlinter]
phase_done "sarif tools, ruff, mypy, import contracts"

# One pytest process more than the cores: many tests wait (on a worker's start, a timeout, the
# editor's debounce), and a third process fills those gaps. --durations: the slowest tests of
# each leg, for the next person who makes CI faster.
# (`nproc --all`: plain `nproc` answers OMP_NUM_THREADS, which is 1 here)
workers="${ONNXLENS_TEST_WORKERS:-$(( $(nproc --all) + 1 ))}"
parallel=(-n "$workers" --dist loadscope --corpus --durations=20)

junit_for() {  # junit: the JUnit XML option of one leg, when ONNXLENS_TEST_REPORTS asks for it
    junit=()
    if [ -n "${ONNXLENS_TEST_REPORTS:-}" ]; then
        junit=("--junitxml=$ONNXLENS_TEST_REPORTS/pytest-torch$1.xml")
        export ONNXLENS_TEST_CPU="$ONNXLENS_TEST_REPORTS/cpu-torch$1"  # tests/cpu_usage.py
        mkdir -p "$ONNXLENS_TEST_CPU"
    fi
    return 0
}

junit_for "$primary"
set +e
"$venv/bin/python" -m pytest "${parallel[@]}" "${junit[@]}" "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "test: pytest collected no tests" >&2
    status=1
fi
phase_done "pytest, torch $primary"

# The VS Code extension's end-to-end tests (code-server + Chromium; mostly waiting on the
# editor) run beside the other torches' tests, which keep the cores busy.
# ONNXLENS_SKIP_EXTENSION=1 leaves them out (e.g. while working on the server alone).
extension_status=0
if [ "$extension" = 1 ]; then
    wait "$extension_job" || extension_status=$?
    cat "$logs/extension"
    if [ "$extension_status" -eq 0 ]; then
        ONNXLENS_EXTENSION_STEPS=e2e ONNXLENS_PYTHON="$venv/bin/python" \
            bash "$repo/vscode-extension/scripts/test.sh" >"$logs/e2e" 2>&1 &
        extension_job=$!
    fi
fi

# The same verdicts on every torch a user has: the other tested torches, each in its venv.
other_status=0
for torch_version in "${others[@]}"; do
    [ "$other_status" -ne 0 ] && break
    wait "${prepared[$torch_version]}" || other_status=$?
    cat "$logs/others-$torch_version"
    [ "$other_status" -ne 0 ] && break
    phase_done "waiting for torch $torch_version's venv"
    echo "test: torch $torch_version: the tests that depend on torch"
    junit_for "$torch_version"
    "$repo/.venv-torch$torch_version/bin/python" -m pytest "${parallel[@]}" \
        -m every_torch "${junit[@]}" "$@" || other_status=$?
    phase_done "pytest -m every_torch, torch $torch_version (the extension's end-to-end beside it)"
done

if [ "$extension" = 1 ] && [ "$extension_status" -eq 0 ]; then
    wait "$extension_job" || extension_status=$?
    echo "test: the extension's end-to-end tests"
    cat "$logs/e2e"
    phase_done "extension end-to-end (what was left of it)"
fi
printf 'test: %s\n' "${timings[@]}"
if [ "$status" -ne 0 ] || [ "$other_status" -ne 0 ] || [ "$extension_status" -ne 0 ]; then
    echo "test: pytest exit $status, other torches' pytest exit $other_status, extension" \
         "tests exit $extension_status" >&2
    exit 1
fi
