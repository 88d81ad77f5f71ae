"""``import molsepnorm`` alone: cheap, and every subpackage reachable from it."""
from __future__ import annotations

import subprocess
import sys


def test_import_molsepnorm_reaches_every_subpackage_on_first_use_without_importing_torch_before():
    code = ("import sys, molsepnorm\n"
            "before = 'torch' in sys.modules\n"
            "names = [molsepnorm.train.add_companion.__name__, molsepnorm.analysis.plot_evaluation.__name__,\n"
            "         molsepnorm.pretrain.pretrain.__name__, molsepnorm.nn.SepNorm.__name__]\n"
            "print(before, ' '.join(names), 'train' in dir(molsepnorm))\n"
            "try:\n"
            "    molsepnorm.trian\n"
            "except AttributeError as err:\n"
            "    print(err)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "False add_companion plot_evaluation pretrain SepNorm True"
    assert out[1] == "module 'molsepnorm' has no attribute 'trian'"
