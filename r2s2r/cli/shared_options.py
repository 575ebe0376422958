"""Options several verbs of the bring-up share (one spelling of each)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

NO_PROGRESS_OPTION = click.option("--no-progress", is_flag=True, help="No progress bars.")
"""``--no-progress``: no progress bars (the verb's ``no_progress`` argument)."""


def publish_option(help: str) -> Callable[[Any], Any]:
    """``--publish DIR``: also copy the verb's report to ``DIR`` (``help`` says which files)."""
    return click.option("--publish", type=click.Path(file_okay=False), default=None, help=help)
