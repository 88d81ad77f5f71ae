"""The training log: ``train.log`` in the run directory plus the terminal, kept clear of the
progress bar."""
from __future__ import annotations

import logging
import sys
from typing import Optional

from molsepnorm.checkpoint.run_dir import RunDir

LOGGER_NAME = "molsepnorm.train"


def setup_logger(run_dir: Optional[RunDir], is_main: bool, console: bool = True) -> logging.Logger:
    """The ``molsepnorm.train`` logger: ``train.log`` plus the terminal on rank 0, quiet elsewhere.

    Terminal messages go through ``tqdm.write`` so they do not break the progress bar.
    Call :func:`close_logger` at the end of the run.
    """
    logger = logging.getLogger(LOGGER_NAME)
    close_logger(logger)
    logger.propagate = False
    logger.setLevel(logging.INFO if is_main else logging.WARNING)
    if is_main and run_dir is not None:
        handler = logging.FileHandler(run_dir.log, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%d %H:%M:%S"))
        logger.addHandler(handler)
    if is_main and console:
        logger.addHandler(_TqdmHandler())
    return logger


def close_logger(logger: Optional[logging.Logger] = None) -> None:
    """Remove and close the handlers of the training logger."""
    logger = logger or logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()


class _TqdmHandler(logging.Handler):
    """Terminal output that keeps the progress bar intact; skips records marked ``file_only``."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        if getattr(record, "file_only", False):
            return
        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # pragma: no cover - logging must never crash training
            self.handleError(record)
