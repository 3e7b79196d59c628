"""Every setting is declared once (exporter/config/schema.py); the CLI, the
[tool.onnxlens] reader, the server's typed settings, the table of docs/configuration.md and
the VS Code extension's manifest are checked against it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import fields

import pytest

from exporter.config.options import Options
from exporter.config.schema import BY_PYPROJECT, SETTINGS, is_excluded
from onnxlens.cli import main
from tests.conftest import FIXTURES, REPO

EXTENSION = REPO / "vscode-extension"


def test_the_servers_settings_are_the_schemas():
    defaults = Options()
    assert [f.name for f in fields(Options)] == [s.lsp for s in SETTINGS]
    for setting in SETTINGS:
        assert getattr(defaults, setting.lsp) == setting.default, setting.lsp


def test_every_cli_flag_exists():
    done = subprocess.run([sys.executable, "-m", "onnxlens", "check", "--help"],
                          capture_output=True, text=True, check=True, cwd=REPO)
    for setting in SETTINGS:
        if setting.cli:
            assert f"{setting.cli} " in done.stdout, setting.cli


def test_the_docs_table_lists_every_setting_with_its_key_and_default():
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    table = page[page.index("| setting | `[tool.onnxlens]` | default | meaning |"):]
    rows = [line for line in table.split("\n\n")[0].splitlines()[2:]]
    listed = {}
    for row in rows:
        name, key, default, _ = [cell.strip() for cell in row.strip().strip("|").split("|")]
        listed[name.strip("`")] = (key.strip("`") or None, default)
    names = {s.vscode or s.lsp for s in SETTINGS}
    assert set(listed) == names
    for setting in SETTINGS:
        key, default = listed[setting.vscode or setting.lsp]
        assert key == setting.pyproject, setting.lsp
        if setting.default in (None, [], {}) or isinstance(setting.default, (int, float, str)):
            shown = {None: "unset", "[]": "`[]`", "{}": "`{}`"}.get(
                None if setting.default is None else json.dumps(setting.default),
                f"`{json.dumps(setting.default)}`".replace(".0`", "`"))
            assert default.startswith(shown), (setting.lsp, default, shown)


def test_the_docs_say_which_settings_each_folder_of_a_workspace_sets():
    page = " ".join((REPO / "docs" / "configuration.md").read_text(encoding="utf-8").split())
    start = page.index("In a multi-root workspace each folder has its own settings")
    per_folder, session = page[start:].split("These are the session's", 1)
    session = session.split(". A problem", 1)[0]
    for setting in SETTINGS:
        name = f"`{setting.vscode or setting.lsp}`"
        assert name in (per_folder if setting.per_folder else session), setting.lsp


def test_the_extension_manifest_and_client_list_every_server_setting():
    manifest = json.loads((EXTENSION / "package.json").read_text())
    properties = manifest["contributes"]["configuration"]["properties"]
    client_only = {"onnxlens.interpreter", "onnxlens.trace.server"}
    assert set(properties) - client_only == {s.vscode_name for s in SETTINGS}
    for setting in SETTINGS:
        declared = properties[setting.vscode_name]
        assert declared["default"] == setting.default, setting.lsp
        if setting.minimum is not None:
            assert declared.get("minimum") == setting.minimum, setting.lsp
        if setting.maximum is not None:
            assert declared.get("maximum") == setting.maximum, setting.lsp
        if setting.choices:  # a "names" list declares them on its items
            enum = declared["items"]["enum"] if setting.kind == "names" else declared["enum"]
            assert tuple(enum) == setting.choices, setting.lsp
        # VS Code lets each folder of a multi-root workspace set only resource-scoped ones
        assert declared["scope"] == ("resource" if setting.per_folder else "window"), \
            setting.lsp
    client = (EXTENSION / "src" / "settings.ts").read_text()
    listed = re.search(r"SERVER_SETTINGS = \[(.*?)\] as const", client, re.S)
    assert listed is not None
    assert sorted(re.findall(r'"([^"]+)"', listed[1])) == sorted(s.vscode or s.lsp
                                                                 for s in SETTINGS)


def test_the_pyproject_reader_takes_every_project_setting(tmp_path):
    from exporter.config.pyproject import load_config

    (tmp_path / "pyproject.toml").write_text(
        '[tool.onnxlens]\nseverity = { ONNX106 = "info" }\nexclude = ["models/old"]\n'
        'extend-exclude = ["scratch"]\ntimeout = 0\n')
    config = load_config(tmp_path)
    assert config.problems == []
    assert config.values == {"severity": {"ONNX106": "info"}, "exclude": ["models/old"],
                             "extend-exclude": ["scratch"], "timeout": 0.0}
    assert set(BY_PYPROJECT) >= set(config.values)


@pytest.mark.parametrize(("value", "problem"), [
    ({"ONNX106": "loud"}, "gives ONNX106 the severity 'loud' (use error, warning or info)"),
    ({"PYL100": "info"}, "names no rule: 'PYL100'"),
    (["ONNX106"], 'must be a table of rule id = "error", "warning" or "info"'),
])
def test_bad_severities_are_named(value, problem):
    checked, found = BY_PYPROJECT["severity"].check(value)
    assert checked is None and found is not None and found.startswith(problem)


def test_a_severity_override_changes_the_report_and_the_exit_status(tmp_path, capsys):
    model = FIXTURES / "no_translation" / "model.py"
    assert main(["check", str(model), "--format", "json", "--severity", "ONNX2=warning"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {d["severity"] for d in report["diagnostics"]} == {"warning"}
    (tmp_path / "pyproject.toml").write_text('[tool.onnxlens]\nseverity = { ONNX201 = "info" }\n')
    (tmp_path / "model.py").write_text(model.read_text())
    # the longest matching id wins; the command line wins over the file
    assert main(["check", str(tmp_path / "model.py"), "--format", "json"]) == 0
    assert {d["severity"] for d in json.loads(capsys.readouterr().out)["diagnostics"]} == {"info"}
    assert main(["check", str(tmp_path / "model.py"), "--severity", "ONNX201=error"]) == 1
    capsys.readouterr()


def test_excludes_skip_directories_by_default_and_by_glob(tmp_path, capsys):
    source = (FIXTURES / "no_translation" / "model.py").read_text()
    for folder in ("models", "build", ".cache", "models/old", "venv/lib"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "model.py").write_text(source)
    (tmp_path / "pyproject.toml").write_text("")

    def checked(*extra: str) -> list[str]:
        main(["check", str(tmp_path), "--format", "json", *extra])
        report = json.loads(capsys.readouterr().out)
        return sorted({t["path"].replace(str(tmp_path), "").lstrip("/")
                       for t in report["targets"]})

    assert checked() == ["models/model.py", "models/old/model.py"]
    assert checked("--extend-exclude", "models/old") == ["models/model.py"]
    # `exclude` replaces the defaults
    assert checked("--exclude", "models") == [".cache/model.py", "build/model.py",
                                              "venv/lib/model.py"]
    # a file named on the command line is checked even when a glob matches it
    main(["check", str(tmp_path / "build" / "model.py"), "--format", "json"])
    assert len(json.loads(capsys.readouterr().out)["targets"]) == 1
    # ... unless --force-exclude (pre-commit's hooks: pre-commit names every changed file)
    named = [str(tmp_path / folder / "model.py") for folder in ("build", "models/old", "models")]
    assert main(["check", *named, "--format", "json", "--force-exclude",
                 "--extend-exclude", "models/old"]) == 1
    assert [t["path"].replace(str(tmp_path), "").lstrip("/")
            for t in json.loads(capsys.readouterr().out)["targets"]] == ["models/model.py"]


def test_glob_matching():
    assert is_excluded(("build", "m.py"), ["build"])
    assert not is_excluded(("builder", "m.py"), ["build"])
    assert is_excluded(("a", "old", "m.py"), ["a/old"])
    assert not is_excluded(("b", "a", "old", "m.py"), ["a/old"])
    assert is_excluded(("x", "m_test.py"), ["*_test.py"])
