"""Writing JSON documents so that a failure leaves no file."""

from __future__ import annotations

import json
import os
import tempfile

from .errors import SacplanError


def check_output_path(path) -> str:
    """The path as a str; SacplanError unless it can name a file to write."""
    if not isinstance(path, (str, os.PathLike)):
        raise SacplanError(f"path: expected a file name, not {type(path).__name__}")
    path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise SacplanError("path: expected a file name, got an empty one")
    if os.path.isdir(path):
        raise SacplanError(f"{path}: is a directory; name the profile file to write")
    return path


def write_json_atomically(doc: dict, path) -> None:
    """Writes to a temporary file beside `path`, then renames it over; on
    any failure no file is left (SacplanError for the OS's)."""
    write_text_atomically(json.dumps(doc, indent=1) + "\n", path)


def write_text_atomically(text: str, path) -> None:
    """write_json_atomically for text that is already a document."""
    path = check_output_path(path)
    tmp = None
    try:
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".sacplan-", suffix=".json", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise SacplanError(f"{path}: cannot write ({exc.strerror or exc})") from exc
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
