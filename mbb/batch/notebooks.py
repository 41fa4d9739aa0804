"""Execute the parameterised notebooks with papermill and export them as offline HTML.

Parameters are passed as absolute paths (the path rule is in `mbb.core.paths`; the kernel's working
directory is the caller's, and papermill's `cwd=` would change it for the whole process).
Nested overrides are passed whole and deep-merged inside the notebook by `mbb.load_params`,
because papermill replaces a nested default instead of merging it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from mbb.core.paths import notebook_file, user_path

__all__ = ["execute_notebook"]


@functools.cache
def _kernel_manager_class() -> type:
    """jupyter_client's kernel manager, asking the kernel to shut down without interrupting it
    first. Its shutdown sends SIGINT before the shutdown request, and a kernel still handling a
    message then logs "KeyboardInterrupt caught in kernel." to the terminal of whoever ran the
    notebook, an alarm about nothing (seen between a study's analyses). mbb's choice: a kernel
    that does not stop on the request is still sent SIGTERM, then SIGKILL, by jupyter_client
    (`finish_shutdown`); an interrupt asked for outside a shutdown is sent as before.

    Built on the first call, not at import (jupyter_client is slow to import and `mbb`'s start-up
    time matters), and once: every later call returns the same class."""
    from jupyter_client import AsyncKernelManager  # type: ignore[attr-defined]

    class QuietShutdownKernelManager(AsyncKernelManager):
        async def _async_interrupt_kernel(self) -> None:
            if self.shutting_down:
                return
            await super()._async_interrupt_kernel()

        interrupt_kernel = _async_interrupt_kernel

    return QuietShutdownKernelManager


def execute_notebook(
    notebook: str | Path,
    out_dir: str | Path,
    parameters: dict[str, Any],
    *,
    html: bool = True,
    kernel_name: str = "python3",
) -> tuple[Path, Path | None]:
    """Run `notebook` (a path, or the bare name of one of mbb's notebooks) into
    `out_dir/<name>.ipynb` (+ `.html`); `parameters` are injected; `html`: also export the page;
    `kernel_name`: the Jupyter kernel (the venv's `python3`). A failing cell raises
    `papermill.PapermillExecutionError`; the notebook with its traceback is still written.
    A parameter the notebook does not declare is an error naming the ones it does (papermill
    would drop it silently). Either way the notebook's hash is recorded in its folder's manifest
    (`mbb.batch.report.record_executed`): only notebooks recorded so are ever reported."""
    import papermill

    from mbb.batch.report import export_html, record_executed

    src = notebook_file(notebook)
    out = user_path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = out / src.name
    for path in (target, target.with_suffix(".html")):
        if path.is_symlink():  # papermill and the export would write into what it points at
            raise ValueError(f"{path}: a symbolic link; mbb never writes a notebook through one")
    declared = papermill.inspect_notebook(str(src))
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        valid = ", ".join(sorted(declared)) or "none: it has no parameters cell"
        raise ValueError(f"{src.name}: no parameter {unknown[0]!r}; its parameters are: {valid}")
    try:
        papermill.execute_notebook(
            str(src),
            str(target),
            parameters=parameters,
            kernel_name=kernel_name,
            progress_bar=False,
            report_mode=False,
            kernel_manager_class=_kernel_manager_class(),
            # the kernel logs a warning about its local TCP ports at start-up, over progress bars
            extra_arguments=["--IPKernelApp.log_level=ERROR"],
        )
    finally:
        if target.is_file() and not target.is_symlink():  # failed or not: mbb executed it
            record_executed(target)
    page = export_html(target) if html else None
    if page is not None:
        record_executed(target, page)
    return target, page
