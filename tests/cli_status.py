"""main(argv) of the command line as the interpreter would end it, for the CLI tests."""
from __future__ import annotations

import sys

from torchutil.studies.cli import main


def status_and_err(argv: list[str], capsys) -> tuple[int, str]:
    """(exit status, stderr) of main(argv). Any exception other than SystemExit propagates,
    failing the test: it would be a traceback."""
    try:
        status = main(argv)
    except SystemExit as e:
        if isinstance(e.code, str):  # the interpreter prints the message and exits with 1
            print(e.code, file=sys.stderr)
            status = 1
        else:
            status = 0 if e.code is None else e.code
    return status, capsys.readouterr().err
