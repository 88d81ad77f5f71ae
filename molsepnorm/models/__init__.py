"""Bundled model files (checkpoints, model cards, training presets); see
:mod:`molsepnorm.checkpoint.bundled` for the registry and ``molsepnorm models`` for a listing."""
