"""The recipe catalogue and recipe files (docs/recipes.md), through the recipes library:
what `lpx recipes`, `lpx recipes show` and `lpx recipes check` print, as Python values."""
import json
import os

from . import _core


def _name(name_or_path):
    if isinstance(name_or_path, os.PathLike):
        return os.fspath(name_or_path)
    if not isinstance(name_or_path, str):
        raise TypeError(f"a recipe is a catalogue name or a path, not {type(name_or_path).__name__}")
    return name_or_path


def list():  # noqa: A001 (the CLI's word)
    """The catalogue's recipe names, in docs/recipes.md#catalogue's order."""
    return _core.recipe_names()


def catalogue():
    """One dict per catalogue recipe: name, summary, describe (formats, rounding and
    transform per role in one line), source; as `lpx recipes` lists them."""
    out = []
    for n in _core.recipe_names():
        s = _core.recipe_summary(n)
        out.append({k: s[k] for k in ("name", "summary", "describe", "source")})
    return out


def show(name_or_path):
    """The recipe (catalogue name or .json file) as canonical JSON text, as `lpx recipes
    show`. A bad file is a ValueError naming the file and the key path."""
    return _core.recipe_summary(_name(name_or_path))["json"]


def load(name_or_path):
    """The recipe as a dict (the canonical JSON parsed: every key, defaults filled in)."""
    return json.loads(show(name_or_path))


def validate(recipe):
    """Checks a recipe given as a file path, JSON text or a dict and returns its
    canonical JSON; ValueError with the library's one line (origin: key path: what is
    wrong; allowed: ...) otherwise, as `lpx recipes check`."""
    if isinstance(recipe, dict):
        return _core.recipe_from_json(json.dumps(recipe), "<dict>")
    text = _name(recipe)
    if text.lstrip().startswith("{"):
        return _core.recipe_from_json(text, "<text>")
    return show(text)
