"""What every typed record shares."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Part(BaseModel):
    """A typed piece of a record: an unknown key is an error, so a renamed field fails the fast tests."""

    model_config = ConfigDict(extra="forbid")
