"""``python -m molsepnorm`` runs the command line."""
from molsepnorm.cli.main import cli

cli()
