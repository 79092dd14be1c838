"""params.yaml's text with a new model added as a person would add it: NAME appended to `models`, its
catalog entry after the last one, one key a line and each input spec on one line, every other line
(comments included) as it was. The result is read back and must hold exactly that entry."""

from __future__ import annotations

import re
from typing import Any

from pipeline.core.config import PARAMS_FILE
from pipeline.prepare.add.inferred import AddError


def with_entry(text: str, name: str, entry: dict[str, Any]) -> str:
    """params.yaml's text with `name` appended to `models` and its catalog entry after the last one,
    every other line as it was (comments included), each input spec on one line as written by hand.
    The result is read back and must hold exactly that."""
    import yaml

    lines = text.splitlines()
    models = _block(lines, "models")
    flow = re.fullmatch(r"models:\s*\[(.*)\]\s*(#.*)?", lines[models[0]])
    if flow:
        items = [item for item in flow.group(1).split(",") if item.strip()]
        lines[models[0]] = f"models: [{', '.join(i.strip() for i in [*items, name])}]" + (
            f"  {flow.group(2)}" if flow.group(2) else ""
        )
    else:
        last = max(i for i in range(models[0] + 1, models[1]) if lines[i].lstrip().startswith("- "))
        lines.insert(last + 1, lines[last][: lines[last].index("-")] + f"- {name}")
    catalog = _block(lines, "catalog")
    lines[catalog[1] : catalog[1]] = entry_lines(name, entry)
    result = "\n".join(lines) + "\n"
    read = yaml.safe_load(result)
    if read["models"][-1] != name or read["catalog"].get(name) != entry:
        raise AddError(f"{PARAMS_FILE}: could not add catalog.{name} and keep the file's layout: write it by hand")
    return result


def _block(lines: list[str], key: str) -> tuple[int, int]:
    """The top-level `key:` line and the index after its block's last content line (before the
    comments and blank lines that introduce the next key)."""
    start = next((i for i, line in enumerate(lines) if line.startswith(f"{key}:")), None)
    if start is None:
        raise AddError(f"{PARAMS_FILE}: no top-level `{key}:`")
    end = next((i for i in range(start + 1, len(lines)) if lines[i][:1] not in ("", " ", "#", "-")), len(lines))
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1
    return start, end


def entry_lines(name: str, entry: dict[str, Any]) -> list[str]:
    """A catalog entry as params.yaml's hand-written ones look: one key a line, specs in flow style."""
    import yaml

    def flow(value: Any) -> str:
        return yaml.safe_dump([value], default_flow_style=True, width=4096, sort_keys=False).strip()[1:-1]

    lines = [f"  {name}:"]
    for key, value in entry.items():
        if key == "inputs":
            lines += ["    inputs:", *(f"      {flow(k)}: {flow(spec)}" for k, spec in value.items())]
        else:
            lines.append(f"    {key}: {flow(value)}")
    return lines
