"""The corpus, computed at run time: which files hold which targets, under which root.

* ``exportdb``: every example of PyTorch's ExportDB (``torch/_export/db/examples``), its source
  copied unchanged into the workspace with a pragma-annotated builder appended;
* ``transformers``: every architecture the pinned transformers builds from a small config
  (:mod:`tests.corpus.hf_probe`), one generated target file each, plus variants
  (:mod:`tests.corpus.hf_models`);
* ``torchvision``: torchvision's classification models and its detection models (NMS,
  data-dependent shapes), random weights, one generated target file each; only where
  torchvision imports beside the installed torch (the torch 2.14.1 leg);
* ``timm``: one model per architecture family (module) of the pinned timm, the smallest that
  builds and runs in eager PyTorch (:mod:`tests.corpus.timm_models`), plus dynamic-shape
  variants; only where timm (and so torchvision) imports beside the installed torch;
* ``diffusers``: diffusers' UNets, autoencoders, adapters and diffusion transformers from small
  configs (:mod:`tests.corpus.diffusers_models`), plus dynamic-shape variants;
* ``fixtures`` and ``examples``: the project's own files, used in place (read-only);
* ``export_scripts``: export scripts modelled on public ones written for the TorchScript
  exporter (``tests/corpus/export_scripts/``, sources in its README) and the project's own
  (``tests/exporter/pipeline/export_calls/``): each ``torch.onnx.export`` call of a marked
  function is a target (docs/export-calls.md), used in place.

Generated files live in a workspace directory the caller gives (a temporary directory);
nothing generated is written inside the repository.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from exporter.source.python_syntax import parse_python
from tests.corpus.common import REPO

SOURCES = ("exportdb", "transformers", "torchvision", "timm", "diffusers", "fixtures", "examples",
           "export_scripts", "variants")
FIXTURES = REPO / "tests" / "exporter" / "fixtures"
EXAMPLES = REPO / "examples"
EXPORT_SCRIPTS = (REPO / "tests" / "corpus" / "export_scripts",
                  REPO / "tests" / "exporter" / "pipeline" / "export_calls")
BUILDER = "_onnxlens_corpus_target"


@dataclass(frozen=True)
class AnnotationProblem:
    """A pragma the static discovery rejects: no target exists, onnxlens must say ONNX001."""

    line: int
    message: str


@dataclass
class CorpusFile:
    source: str
    path: Path
    root: Path
    targets: list[str]
    annotation_problems: list[AnnotationProblem] = field(default_factory=list)
    #: directories of "installed" packages the file imports, outside its root: on
    #: ``PYTHONPATH`` for onnxlens and the truth alike (generated variants' site-packages)
    python_path: tuple[Path, ...] = ()

    @property
    def label(self) -> str:
        base = REPO if self.source in ("fixtures", "examples", "export_scripts") else self.root
        return self.path.relative_to(base).as_posix()


@dataclass(frozen=True)
class NotBuildable:
    source: str
    name: str
    reason: str


@dataclass
class Corpus:
    workspace: Path
    files: list[CorpusFile] = field(default_factory=list)
    not_buildable: list[NotBuildable] = field(default_factory=list)

    def extend(self, other: Corpus) -> None:
        self.files += other.files
        self.not_buildable += other.not_buildable

    def select(self, keep: Callable[[CorpusFile, str], bool]) -> Corpus:
        """A corpus with only the targets ``keep(file, target)`` accepts."""
        chosen = Corpus(self.workspace, not_buildable=list(self.not_buildable))
        for corpus_file in self.files:
            targets = [t for t in corpus_file.targets if keep(corpus_file, t)]
            problems = corpus_file.annotation_problems if keep(corpus_file, "") else []
            if targets or problems:
                chosen.files.append(CorpusFile(corpus_file.source, corpus_file.path,
                                               corpus_file.root, targets, problems,
                                               corpus_file.python_path))
        return chosen


def _described(path: Path, source: str, root: Path) -> CorpusFile | None:
    from exporter.source.targets import discover

    text = path.read_text(encoding="utf-8")
    if "onnx-export" not in text and "ExportableModule" not in text:
        return None
    found = discover(path, text)
    problems = [AnnotationProblem(d.location.range.start.line, d.message)
                for d in found.diagnostics if d.rule == "ONNX001"]  # not the ONNX60x warnings
    if not found.targets and not problems:
        return None
    return CorpusFile(source, path, root, [t.name for t in found.targets], problems)


# -- ExportDB --------------------------------------------------------------------------------

def exportdb_directory() -> Path:
    spec = importlib.util.find_spec("torch")  # finds torch without importing it
    assert spec is not None and spec.submodule_search_locations
    return Path(spec.submodule_search_locations[0]) / "_export" / "db" / "examples"


def exportdb_names() -> list[str]:
    return sorted(p.stem for p in exportdb_directory().glob("*.py") if p.stem != "__init__")


def _module_names(source: str) -> set[str]:
    names: set[str] = set()
    for node in parse_python(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def exportdb_target(name: str, source: str) -> str | None:
    """The example's source, unchanged, with a builder for its case appended; None when the
    example has no ``model`` and ``example_args``."""
    defined = _module_names(source)
    if not {"model", "example_args"} <= defined:
        return None
    pragma = f'# onnx-export: name="exportdb.{name}"'
    if "dynamic_shapes" in defined:
        pragma += ", dynamic_shapes=dynamic_shapes"
    returned = "model, example_args, example_kwargs" if "example_kwargs" in defined \
        else "model, example_args"
    return (f"{source.rstrip()}\n\n\n{pragma}\ndef {BUILDER}():\n    return {returned}\n")


def materialize_exportdb(workspace: Path, names: Iterable[str] | None = None) -> Corpus:
    root = workspace / "exportdb"
    root.mkdir(parents=True, exist_ok=True)
    corpus = Corpus(workspace)
    for name in names if names is not None else exportdb_names():
        source = (exportdb_directory() / f"{name}.py").read_text(encoding="utf-8")
        text = exportdb_target(name, source)
        if text is None:
            corpus.not_buildable.append(NotBuildable("exportdb", name,
                                                     "no `model`/`example_args` in the example"))
            continue
        # prefixed: an example named like an installed module (`decorator`) must not shadow it
        path = root / f"exportdb_{name}.py"
        path.write_text(text, encoding="utf-8")
        corpus.files.append(CorpusFile("exportdb", path, root, [f"exportdb.{name}"]))
    return corpus


# -- transformers ----------------------------------------------------------------------------

def materialize_transformers(workspace: Path, jobs: int = 2, *, types: list[str] | None = None,
                             names: set[str] | None = None, log: Callable[[str], None] | None = None
                             ) -> Corpus:
    """``types``: probe only these model types (default: all); ``names``: keep only these
    target names (variants included)."""
    from tests.corpus import hf_models, hf_probe

    root = workspace / "transformers"
    root.mkdir(parents=True, exist_ok=True)
    probed = hf_probe.probe_all(jobs, types=types, log=log)
    corpus = Corpus(workspace, not_buildable=[
        NotBuildable("transformers", f"hf.{r.model_type}", r.reason)
        for r in probed if not r.buildable])
    for spec in hf_models.variants(probed):
        if names is not None and spec.name not in names:
            continue
        path = root / spec.file_name
        path.write_text(hf_models.render(spec), encoding="utf-8")
        corpus.files.append(CorpusFile("transformers", path, root, [spec.name]))
    return corpus


# -- torchvision ----------------------------------------------------------------------------

#: detection models, with the image size their transform resizes to
TORCHVISION_DETECTION = {"fasterrcnn_mobilenet_v3_large_320_fpn": 320,
                         "ssdlite320_mobilenet_v3_large": 320}
_TORCHVISION_TEMPLATE = '''"""torchvision's `{model}`, random weights (the differential corpus)."""
import torch
import torchvision


# onnx-export: name="tv.{model}"
def {builder}():
    torch.manual_seed(0)
    model = torchvision.models.get_model("{model}", weights=None{backbone}).eval()
    return model, ({example},)
'''


def torchvision_models() -> list[str] | None:
    """Every classification model and the detection models; None without torchvision."""
    if importlib.util.find_spec("torchvision") is None:
        return None
    try:
        import torchvision
    except Exception:  # PyPI's torchvision does not import beside another torch's build
        return None
    classification = torchvision.models.list_models(module=torchvision.models)
    return sorted(classification) + sorted(TORCHVISION_DETECTION)


def torchvision_source(model: str) -> str:
    size = TORCHVISION_DETECTION.get(model)
    example = (f"[torch.rand(3, {size}, {size})]" if size
               else "torch.randn(1, 3, 224, 224)")  # 224: what ViT and Swin insist on
    return _TORCHVISION_TEMPLATE.format(model=model, builder=BUILDER, example=example,
                                        backbone=", weights_backbone=None" if size else "")


def materialize_torchvision(workspace: Path, names: Iterable[str] | None = None) -> Corpus:
    root = workspace / "torchvision"
    root.mkdir(parents=True, exist_ok=True)
    corpus = Corpus(workspace)
    available = torchvision_models()
    if available is None:
        corpus.not_buildable.append(NotBuildable(
            "torchvision", "tv.*", "torchvision does not import beside this torch"))
        return corpus
    for model in available if names is None else [n for n in names if n in available]:
        path = root / f"tv_{model}.py"
        path.write_text(torchvision_source(model), encoding="utf-8")
        corpus.files.append(CorpusFile("torchvision", path, root, [f"tv.{model}"]))
    return corpus


# -- timm and diffusers (tests/corpus/timm_models.py, tests/corpus/diffusers_models.py) -------

def materialize_timm(workspace: Path, jobs: int = 2, *, families: list[str] | None = None,
                     names: set[str] | None = None, log: Callable[[str], None] | None = None
                     ) -> Corpus:
    """``families``: probe only these timm modules (default: all); ``names``: keep only these
    target names (variants included)."""
    from tests.corpus import timm_models

    root = workspace / "timm"
    root.mkdir(parents=True, exist_ok=True)
    corpus = Corpus(workspace)
    available, why = timm_models.timm_families()
    if available is None:
        corpus.not_buildable.append(NotBuildable("timm", "timm.*", why))
        return corpus
    probed = timm_models.probe_all([f for f in available if families is None or f in families],
                                   jobs, log=log)
    corpus.not_buildable += [NotBuildable("timm", f"timm.<{family}>", result.get("reason", ""))
                             for family, result in probed.items() if not result.get("buildable")]
    for spec in timm_models.specs(probed):
        if names is not None and spec.name not in names:
            continue
        path = root / spec.file_name
        path.write_text(timm_models.render(spec), encoding="utf-8")
        corpus.files.append(CorpusFile("timm", path, root, [spec.name]))
    return corpus


def materialize_diffusers(workspace: Path, jobs: int = 2, *, names: set[str] | None = None,
                          log: Callable[[str], None] | None = None) -> Corpus:
    """``names``: keep (and probe) only these target names (a variant brings its class)."""
    from tests.corpus import diffusers_models
    from tests.corpus.probing import package_version

    root = workspace / "diffusers"
    root.mkdir(parents=True, exist_ok=True)
    corpus = Corpus(workspace)
    if package_version("diffusers") is None:
        corpus.not_buildable.append(NotBuildable(
            "diffusers", "diffusers.*", "diffusers is not installed (the `dev` extra)"))
        return corpus
    classes = [spec.name for spec in diffusers_models.MODELS
               if names is None or any(n == spec.name or n.startswith(spec.name + ".")
                                       for n in names)]
    probed = diffusers_models.probe_all(classes, jobs, log=log)
    corpus.not_buildable += [NotBuildable("diffusers", name, result.get("reason", ""))
                             for name, result in probed.items() if not result.get("buildable")]
    buildable = {name for name, result in probed.items() if result.get("buildable")}
    for spec in diffusers_models.variants(buildable):
        if names is not None and spec.name not in names:
            continue
        path = root / spec.file_name
        path.write_text(diffusers_models.render(spec), encoding="utf-8")
        corpus.files.append(CorpusFile("diffusers", path, root, [spec.name]))
    return corpus


# -- generated variants (tests/corpus/variants/) -------------------------------------------

def materialize_variants(workspace: Path, names: Iterable[str] | None = None) -> Corpus:
    """Every generated variant (only ``names`` when given), a file each."""
    from tests.corpus.variants import all_variants, write_variants
    from tests.corpus.variants.common import site_packages

    root = workspace / "variants"
    chosen = [v for v in all_variants() if names is None or v.name in set(names)]
    corpus = Corpus(workspace)
    for variant, path in zip(chosen, write_variants(root, chosen)):
        python_path = (site_packages(root),) if variant.packages else ()
        corpus.files.append(CorpusFile("variants", path, root, [variant.target_name],
                                       python_path=python_path))
        corpus.files += [CorpusFile("variants", root / relative, root, [target],
                                    python_path=python_path)
                         for relative, target in variant.more_targets]
    return corpus


# -- the project's own files -----------------------------------------------------------------

def project_files(source: str) -> Corpus:
    corpus = Corpus(REPO)
    if source == "fixtures":
        for workspace in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
            for path in sorted(workspace.rglob("*.py")):
                found = _described(path, "fixtures", workspace)
                if found:
                    corpus.files.append(found)
    elif source == "export_scripts":
        for directory in EXPORT_SCRIPTS:
            for path in sorted(directory.glob("*.py")):
                found = _described(path, "export_scripts", directory)
                if found:
                    corpus.files.append(found)
    else:
        for path in sorted(EXAMPLES.rglob("*.py")):
            found = _described(path, "examples", REPO)
            if found:
                corpus.files.append(found)
    return corpus


def materialize(workspace: Path, sources: Iterable[str] = SOURCES, jobs: int = 2,
                log: Callable[[str], None] | None = None,
                timm_families: list[str] | None = None) -> Corpus:
    """``timm_families``: probe only these timm modules (default: all of them)."""
    corpus = Corpus(workspace)
    for source in sources:
        if source == "exportdb":
            corpus.extend(materialize_exportdb(workspace))
        elif source == "transformers":
            corpus.extend(materialize_transformers(workspace, jobs, log=log))
        elif source == "torchvision":
            corpus.extend(materialize_torchvision(workspace))
        elif source == "timm":
            corpus.extend(materialize_timm(workspace, jobs, families=timm_families, log=log))
        elif source == "diffusers":
            corpus.extend(materialize_diffusers(workspace, jobs, log=log))
        elif source == "variants":
            corpus.extend(materialize_variants(workspace))
        else:
            corpus.extend(project_files(source))
    return corpus
